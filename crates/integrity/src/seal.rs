//! Seals over chain state: only a worker can write the state that lets a request skip steps.

use ring::hmac;

const SEAL_KEY_DOMAIN: &[u8] = b"airlock/v1/chain-seal-key\0";

/// The HMAC-SHA256 key that seals chain state (see [`crate::FleetKey::seal_key`]).
pub struct SealKey(hmac::Key);

/// A seal: the HMAC-SHA256 of a chain state's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed(pub [u8; 32]);

impl SealKey {
    pub(crate) fn derive(seed: &[u8; 32]) -> Self {
        let mut material = SEAL_KEY_DOMAIN.to_vec();
        material.extend_from_slice(seed);
        Self(hmac::Key::new(hmac::HMAC_SHA256, &crate::digest(&material)))
    }

    /// The seal over `parts`, each length-prefixed so that no two lists of parts share a text.
    pub fn seal(&self, parts: &[&[u8]]) -> Sealed {
        let tag = hmac::sign(&self.0, &framed(parts));
        Sealed(tag.as_ref().try_into().expect("HMAC-SHA256 tags are 32 bytes"))
    }

    /// Whether `seal` is this key's seal over `parts` (compared in constant time).
    pub fn check(&self, parts: &[&[u8]], seal: &[u8]) -> bool {
        hmac::verify(&self.0, &framed(parts), seal).is_ok()
    }
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

fn framed(parts: &[&[u8]]) -> Vec<u8> {
    let mut text = Vec::with_capacity(parts.iter().map(|part| 8 + part.len()).sum());
    for part in parts {
        text.extend_from_slice(&(part.len() as u64).to_le_bytes());
        text.extend_from_slice(part);
    }
    text
}
