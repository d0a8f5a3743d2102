//! Test certificates for a cluster: a CA, a certificate for each node (naming 127.0.0.1 and
//! localhost), and one for a client, as PEM files (`bloomkv-node gen-certs`). For trying TLS
//! out on one machine; a real cluster's come from its own CA.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

/// Writes `ca.pem`, `nodeN.pem` and `nodeN.key` for each of `nodes`, and `client.pem` and
/// `client.key`, into `dir` (which must exist).
pub fn generate(dir: &Path, nodes: &[u64]) -> Result<(), Box<dyn std::error::Error>> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "bloomkv test CA");
    let ca = ca_params.self_signed(&ca_key)?;
    std::fs::write(dir.join("ca.pem"), ca.pem())?;
    let names: Vec<String> = nodes
        .iter()
        .map(|id| format!("node{id}"))
        .chain(["client".to_string()])
        .collect();
    for name in names {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, &name);
        let cert = params.signed_by(&key, &ca, &ca_key)?;
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem())?;
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem())?;
    }
    Ok(())
}
