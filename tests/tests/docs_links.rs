//! The documentation stays true: README.md and docs/*.md link only to files and headings that
//! exist, name only `cargo xtask` commands and flags and `lmboot-host` flags their usage texts
//! have, and docs/card.md's table of `lmboot.txt` keys is the parser's own (`xtask::docs`).

#[test]
fn links_commands_and_flags_exist() {
    let bad = xtask::docs::check_pages().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        bad.is_empty(),
        "{} problems:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_card_page_lists_every_key() {
    let path = xtask::docs::card_page();
    let md = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let want = xtask::docs::with_key_table(&md).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        want == md,
        "docs/card.md's table of keys differs from KEYS in runtime/src/config.rs: run `cargo xtask docs`"
    );
}
