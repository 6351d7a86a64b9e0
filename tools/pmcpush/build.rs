//! Generates the pprof messages (`perftools.profiles`, from pmcprof's copy of `profile.proto`, the
//! one the workspace keeps) and Parca's `WriteRaw` service (`proto/`), with protox (a Rust
//! protobuf compiler: no protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["../pmcprof/proto/profile.proto", "proto/parca_profilestore.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["../pmcprof/proto", "proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        // The server is for the tests' receiver; it costs nothing to a build that does not use it.
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
