//! Compiles `proto/airlock/v1/*.proto` with protox, so no system `protoc` is needed.

fn main() {
    // Read when the script runs, not when it was compiled: a build script binary may be reused
    // from another checkout of the same workspace.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = std::path::Path::new(&manifest).join("../../proto");
    let file = root.join("airlock/v1/airlock.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let descriptors = protox::compile([&file], [&root]).unwrap_or_else(|e| panic!("{e}"));
    prost_build::Config::new()
        // Ordered maps: the same message always encodes to the same bytes.
        .btree_map(["."])
        .compile_fds(descriptors)
        .unwrap_or_else(|e| panic!("generating Rust from the wire contract failed: {e}"));
}
