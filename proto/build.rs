//! Compiles the E2B-compatible protos with protox (pure Rust; no system `protoc`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/orchestrator.proto", "proto/info.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // The services need tonic; the messages alone need only prost.
        .server_mod_attribute(".", "#[cfg(feature = \"grpc\")]")
        .client_mod_attribute(".", "#[cfg(feature = \"grpc\")]")
        .compile_fds(fds)?;
    Ok(())
}
