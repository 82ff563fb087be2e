//! `lmboot-host`: the PC runner, a thin std shell over `inference`.
//!
//! For now it inspects a model: `lmboot-host --model FILE.gguf --info` prints the metadata and the
//! tensor table read through the same storage trait the kernel's page cache implements.

use inference::gguf::Value;
use inference::storage::FileStorage;
use inference::Gguf;
use std::path::PathBuf;
use std::process::exit;

fn main() {
    let mut model: Option<PathBuf> = None;
    let mut info = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" | "-m" => model = args.next().map(PathBuf::from),
            "--info" => info = true,
            "-h" | "--help" => {
                println!("usage: lmboot-host --model FILE.gguf --info");
                return;
            }
            other => {
                eprintln!("lmboot-host: unknown argument {other:?} (try --help)");
                exit(2);
            }
        }
    }
    let Some(path) = model else {
        eprintln!("lmboot-host: --model FILE.gguf is required");
        exit(2);
    };
    let src = match FileStorage::open(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lmboot-host: cannot open {}: {e}", path.display());
            exit(1);
        }
    };
    let g = match Gguf::open(&src) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("lmboot-host: {}: {e}", path.display());
            exit(1);
        }
    };
    if info {
        println!("GGUF v{}, {} bytes, alignment {}, data at {}", g.version, g.file_len, g.alignment, g.data_offset);
        for e in &g.metadata {
            match &e.value {
                Value::Array(a) => println!("{} = [{}; {}]", e.key, a.elem.name(), a.len),
                Value::String(s) if s.len() > 80 => println!("{} = {:?}...", e.key, &s[..s.floor_char_boundary(80)]),
                v => println!("{} = {v:?}", e.key),
            }
        }
        for t in &g.tensors {
            println!("{:<32} {:<5} {:?} @ {} ({} bytes)", t.name, t.ty.name(), t.shape(), t.offset, t.size);
        }
    }
}
