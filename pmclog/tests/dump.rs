#[test]
fn nested_cargo() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["run", "-q", "-p", "pmclog", "--example", "dump", "--", "/nonexistent"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    eprintln!("{:?}", out);
}
