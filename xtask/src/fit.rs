//! U-Boot FIT images (Flattened Image Tree) for the boards whose vendor U-Boot starts a kernel
//! with `bootm` (the Milk-V Duo family loads `boot.sd` and runs `bootm ADDR#config-NAME`; the
//! SpacemiT K1's U-Boot loads a FIT the same way): a device tree blob holding the kernel image,
//! a device tree for it, and the configurations naming them. Written here rather than with
//! `mkimage` (Debian's u-boot-tools): it is a few hundred bytes of structure around the
//! kernel, and the tests read it back with the kernel's own device tree reader.
//!
//! The layout is what `mkimage -f` makes of the vendor's `multi.its` (the Duo's SDK and
//! RT-Thread's `bsp/cvitek` pack theirs so): `/images/kernel-1` (type `kernel`, arch `riscv`, os
//! `linux` so that `bootm` enters it in S-mode with the hart id in a0 and the device tree in
//! a1, no compression, load and entry as two cells, a `crc32` hash), `/images/fdt-1` (`flat_dt`,
//! a `sha256` hash), and one configuration per name the board's U-Boot may ask for, each naming
//! both. U-Boot checks the root's `description` and `timestamp`, and the hashes.

use sha2::{Digest, Sha256};

/// A device tree node: properties and children, in order.
#[derive(Debug, Default, Clone)]
pub struct Node {
    pub name: String,
    pub props: Vec<(String, Vec<u8>)>,
    pub children: Vec<Node>,
}

impl Node {
    pub fn new(name: &str) -> Node {
        Node {
            name: name.into(),
            ..Node::default()
        }
    }

    /// A string property (NUL-terminated).
    pub fn string(mut self, name: &str, v: &str) -> Node {
        let mut b = v.as_bytes().to_vec();
        b.push(0);
        self.props.push((name.into(), b));
        self
    }

    /// A property of 32-bit cells (big-endian).
    pub fn cells(mut self, name: &str, v: &[u32]) -> Node {
        self.props.push((
            name.into(),
            v.iter().flat_map(|c| c.to_be_bytes()).collect(),
        ));
        self
    }

    /// A 64-bit value as two cells.
    pub fn u64(self, name: &str, v: u64) -> Node {
        self.cells(name, &[(v >> 32) as u32, v as u32])
    }

    /// A property holding raw bytes.
    pub fn bytes(mut self, name: &str, v: &[u8]) -> Node {
        self.props.push((name.into(), v.to_vec()));
        self
    }

    /// An empty property (a flag).
    pub fn flag(self, name: &str) -> Node {
        self.bytes(name, &[])
    }

    pub fn child(mut self, c: Node) -> Node {
        self.children.push(c);
        self
    }
}

const FDT_MAGIC: u32 = 0xd00d_feed;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const END: u32 = 9;
/// The header's size (version 17).
const HEADER: usize = 40;

/// The blob of the tree rooted at `root` (its name is ignored: the root's is empty).
pub fn to_blob(root: &Node) -> Vec<u8> {
    let mut structure = Vec::new();
    let mut strings: Vec<u8> = Vec::new();
    emit(root, true, &mut structure, &mut strings);
    structure.extend(END.to_be_bytes());
    let rsv = HEADER.next_multiple_of(8);
    let off_struct = rsv + 16;
    let off_strings = off_struct + structure.len();
    let total = off_strings + strings.len();
    let mut b = Vec::with_capacity(total);
    for v in [
        FDT_MAGIC,
        total as u32,
        off_struct as u32,
        off_strings as u32,
        rsv as u32,
        17,
        16,
        0,
        strings.len() as u32,
        structure.len() as u32,
    ] {
        b.extend(v.to_be_bytes());
    }
    b.resize(rsv + 16, 0); // the memory reservation map: its terminating entry only
    b.extend(structure);
    b.extend(strings);
    b
}

fn emit(n: &Node, root: bool, s: &mut Vec<u8>, strings: &mut Vec<u8>) {
    s.extend(BEGIN_NODE.to_be_bytes());
    s.extend(if root { "" } else { n.name.as_str() }.as_bytes());
    s.push(0);
    pad4(s);
    for (name, value) in &n.props {
        s.extend(PROP.to_be_bytes());
        s.extend((value.len() as u32).to_be_bytes());
        s.extend(string_offset(strings, name).to_be_bytes());
        s.extend(value);
        pad4(s);
    }
    for c in &n.children {
        emit(c, false, s, strings);
    }
    s.extend(END_NODE.to_be_bytes());
}

fn pad4(s: &mut Vec<u8>) {
    s.resize(s.len().next_multiple_of(4), 0);
}

/// The offset of `name` in the strings block, added if new.
fn string_offset(strings: &mut Vec<u8>, name: &str) -> u32 {
    let mut at = 0;
    for s in strings.split(|&c| c == 0) {
        if s == name.as_bytes() && at < strings.len() {
            return at as u32;
        }
        at += s.len() + 1;
    }
    let off = strings.len();
    strings.extend(name.as_bytes());
    strings.push(0);
    off as u32
}

/// What a board's FIT holds.
#[derive(Debug, Clone)]
pub struct FitSpec<'a> {
    pub description: &'a str,
    /// The flat kernel image, loaded and entered at `load`.
    pub kernel: &'a [u8],
    pub load: u64,
    /// The device tree blob handed to the kernel.
    pub fdt: &'a [u8],
    /// The configuration names the board's U-Boot may ask for (`bootm ADDR#NAME`), the first
    /// the default.
    pub configs: &'a [String],
}

/// The FIT image.
pub fn fit(spec: &FitSpec<'_>) -> Vec<u8> {
    let crc = crc32fast::hash(spec.kernel);
    let sha: [u8; 32] = Sha256::digest(spec.fdt).into();
    let kernel = Node::new("kernel-1")
        .string("description", "lmboot")
        .bytes("data", spec.kernel)
        .string("type", "kernel")
        .string("arch", "riscv")
        .string("os", "linux")
        .string("compression", "none")
        .u64("load", spec.load)
        .u64("entry", spec.load)
        .child(
            Node::new("hash-1")
                .cells("value", &[crc])
                .string("algo", "crc32"),
        );
    let fdt = Node::new("fdt-1")
        .string("description", "lmboot's device tree")
        .bytes("data", spec.fdt)
        .string("type", "flat_dt")
        .string("arch", "riscv")
        .string("compression", "none")
        .child(
            Node::new("hash-1")
                .bytes("value", &sha)
                .string("algo", "sha256"),
        );
    let mut configs = Node::new("configurations");
    if let Some(first) = spec.configs.first() {
        configs = configs.string("default", first);
    }
    for c in spec.configs {
        configs = configs.child(
            Node::new(c)
                .string("description", spec.description)
                .string("kernel", "kernel-1")
                .string("fdt", "fdt-1"),
        );
    }
    let root = Node::new("")
        // A fixed time, so that the same kernel gives the same image.
        .cells("timestamp", &[0])
        .string("description", spec.description)
        .cells("#address-cells", &[1])
        .child(Node::new("images").child(kernel).child(fdt))
        .child(configs);
    to_blob(&root)
}

/// What the kernel reads from the device tree a board's FIT hands it.
#[derive(Debug, Clone)]
pub struct BoardTree<'a> {
    pub model: &'a str,
    pub compatible: &'a [String],
    /// RAM blocks `(start, size)` the kernel may use.
    pub memory: &'a [(u64, u64)],
    pub timebase_hz: u32,
    pub harts: u32,
    /// Each hart's `riscv,isa`.
    pub isa: &'a str,
    /// `riscv,cbom-block-size` (Zicbom), if the harts have it.
    pub cbom_block: Option<u32>,
}

/// A minimal device tree for the kernel: model, memory, harts, timebase (U-Boot adds `/chosen`
/// and fixes the memory and reserved regions up as it does for Linux).
pub fn board_tree(t: &BoardTree<'_>) -> Vec<u8> {
    let mut compatible = Vec::new();
    for c in t.compatible {
        compatible.extend(c.as_bytes());
        compatible.push(0);
    }
    let mut cpus = Node::new("cpus")
        .cells("#address-cells", &[1])
        .cells("#size-cells", &[0])
        .cells("timebase-frequency", &[t.timebase_hz]);
    for h in 0..t.harts {
        let mut cpu = Node::new(&format!("cpu@{h}"))
            .string("device_type", "cpu")
            .cells("reg", &[h])
            .string("compatible", "riscv")
            .string("riscv,isa", t.isa)
            .string("status", "okay");
        if let Some(b) = t.cbom_block {
            cpu = cpu.cells("riscv,cbom-block-size", &[b]);
        }
        cpus = cpus.child(cpu);
    }
    let mut root = Node::new("")
        .cells("#address-cells", &[2])
        .cells("#size-cells", &[2])
        .string("model", t.model)
        .bytes("compatible", &compatible)
        .child(Node::new("chosen"))
        .child(cpus);
    for &(start, size) in t.memory {
        root = root.child(
            Node::new(&format!("memory@{start:x}"))
                .string("device_type", "memory")
                .cells(
                    "reg",
                    &[
                        (start >> 32) as u32,
                        start as u32,
                        (size >> 32) as u32,
                        size as u32,
                    ],
                ),
        );
    }
    to_blob(&root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drivers::fdt::Fdt;

    fn be64(v: &[u8]) -> u64 {
        drivers::fdt::cells(v).expect("one or two cells")
    }

    /// A FIT as the Duo's U-Boot reads it: the root's description and timestamp, the kernel's
    /// load and entry, its data and crc32, the device tree's data and sha256, and every
    /// configuration naming both.
    #[test]
    fn a_fit_reads_back_with_its_addresses_hashes_and_configurations() {
        let kernel: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let configs = ["config-a".to_string(), "config-b".to_string()];
        let ram = [(0x8000_0000u64, 0x03f4_0000u64)];
        let compatible = ["milkv,duo".to_string()];
        let tree = board_tree(&BoardTree {
            model: "test",
            compatible: &compatible,
            memory: &ram,
            timebase_hz: 25_000_000,
            harts: 1,
            isa: "rv64imafdc_xtheadvector",
            cbom_block: None,
        });
        let blob = fit(&FitSpec {
            description: "lmboot test",
            kernel: &kernel,
            load: 0x8020_0000,
            fdt: &tree,
            configs: &configs,
        });
        let t = Fdt::new(&blob).expect("the FIT is a device tree");
        let p = |path: &[&str], name: &str| {
            t.property(path, name)
                .unwrap()
                .unwrap_or_else(|| panic!("{path:?} {name}"))
        };
        assert_eq!(p(&[], "description"), b"lmboot test\0");
        assert_eq!(p(&[], "timestamp").len(), 4);
        let k = ["images", "kernel-1"];
        assert_eq!(p(&k, "data"), &kernel[..]);
        assert_eq!(be64(p(&k, "load")), 0x8020_0000);
        assert_eq!(be64(p(&k, "entry")), 0x8020_0000);
        assert_eq!(p(&k, "type"), b"kernel\0");
        assert_eq!(p(&k, "os"), b"linux\0");
        assert_eq!(p(&k, "arch"), b"riscv\0");
        assert_eq!(
            p(&["images", "kernel-1", "hash-1"], "value"),
            crc32fast::hash(&kernel).to_be_bytes()
        );
        let f = ["images", "fdt-1"];
        assert_eq!(p(&f, "data"), &tree[..]);
        let sha: [u8; 32] = Sha256::digest(&tree).into();
        assert_eq!(p(&["images", "fdt-1", "hash-1"], "value"), sha);
        assert_eq!(p(&["configurations"], "default"), b"config-a\0");
        for c in &configs {
            assert_eq!(p(&["configurations", c], "kernel"), b"kernel-1\0");
            assert_eq!(p(&["configurations", c], "fdt"), b"fdt-1\0");
        }
        // The kernel's device tree: what the kernel reads from it at boot.
        let d = Fdt::new(&tree).expect("the board tree");
        let ram = d.memory().unwrap();
        assert_eq!(
            ram.as_slice()
                .iter()
                .map(|b| (b.start, b.end))
                .collect::<Vec<_>>(),
            vec![(0x8000_0000, 0x83f4_0000)]
        );
        assert_eq!(
            d.property(&["cpus"], "timebase-frequency")
                .unwrap()
                .and_then(drivers::fdt::cells),
            Some(25_000_000)
        );
        assert_eq!(
            d.property(&["cpus", "cpu@"], "riscv,isa").unwrap(),
            Some(&b"rv64imafdc_xtheadvector\0"[..])
        );
    }

    /// Strings shared by several properties are stored once; the blob's sizes add up.
    #[test]
    fn the_blob_header_adds_up() {
        let b = to_blob(
            &Node::new("")
                .string("a", "x")
                .child(Node::new("n").string("a", "y")),
        );
        let word = |i: usize| u32::from_be_bytes(b[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
        assert_eq!(word(0), FDT_MAGIC as usize);
        assert_eq!(word(1), b.len());
        assert_eq!(word(3) + word(8), b.len(), "strings at the end");
        assert_eq!(word(8), 2, "\"a\" once");
        assert_eq!(word(2) + word(9), word(3));
    }
}
