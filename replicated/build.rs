//! Generates the gRPC code for `proto/bloomkv.proto`: protox parses it (no `protoc` needed),
//! tonic's builder writes the messages and the services into `OUT_DIR`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/bloomkv.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
