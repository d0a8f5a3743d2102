//! Test certificates for a cluster: a node CA and a certificate for each node (naming
//! 127.0.0.1 and localhost), and a client CA of its own and a certificate for a client, as PEM
//! files (`bloomkv-node gen-certs`). Two CAs, so that no client certificate passes for a
//! node's. For trying TLS out on one machine; a real cluster's come from its own CAs.

use std::path::Path;

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair, SanType};

/// A self-signed CA named `name`, written to `dir/file`.
fn new_ca(
    dir: &Path,
    file: &str,
    name: &str,
) -> Result<(Certificate, KeyPair), Box<dyn std::error::Error>> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key)?;
    std::fs::write(dir.join(file), cert.pem())?;
    Ok((cert, key))
}

/// A certificate named `name` for 127.0.0.1 and localhost, signed by `ca`, written to
/// `dir/name.pem` and its key to `dir/name.key`.
fn issue(
    dir: &Path,
    name: &str,
    (ca, ca_key): &(Certificate, KeyPair),
) -> Result<(), Box<dyn std::error::Error>> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.signed_by(&key, ca, ca_key)?;
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem())?;
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem())?;
    Ok(())
}

/// Writes `ca.pem` (the node CA), `nodeN.pem` and `nodeN.key` for each of `nodes`, and
/// `client-ca.pem`, `client.pem` and `client.key`, into `dir` (which must exist).
pub fn generate(dir: &Path, nodes: &[u64]) -> Result<(), Box<dyn std::error::Error>> {
    let node_ca = new_ca(dir, "ca.pem", "bloomkv test node CA")?;
    for id in nodes {
        issue(dir, &format!("node{id}"), &node_ca)?;
    }
    let client_ca = new_ca(dir, "client-ca.pem", "bloomkv test client CA")?;
    issue(dir, "client", &client_ca)
}
