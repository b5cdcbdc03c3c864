//! Who may decide: proofs over what the fleet answers, and seals over the chain state it
//! hands to external steps.
//!
//! The broker routes messages but does not vouch for them: anyone with broker credentials
//! can publish anything anywhere. So a runner takes a reply only with a valid proof by a fleet
//! key over the reply *and* a digest of the exact request the runner sent (a decision cannot
//! be replayed onto another call); a worker continues a chain only from chain state it sealed
//! itself; and a person's answer counts only with the signature of the reviewer service that
//! recorded it.
//!
//! Schemes, from `ring` (already built for TLS) and `x25519-dalek`:
//! - replies: X25519 agreement between the fleet key and each runner's ephemeral key, then
//!   HMAC-SHA256 per reply ([`fleet`]);
//! - chain state: HMAC-SHA256 under a key derived from the fleet key ([`seal`]);
//! - a person's answer: Ed25519 by the reviewer service's key ([`signature`]).
//!
//! Every proved text starts with a [`Domain`] tag, so a proof made for one purpose never
//! holds for another.
//!
//! Layout:
//! - [`keys`]: key files ([`KeyFile`]), key ids and sets of public keys.
//! - [`fleet`]: the fleet key, the runner's keys and reply proofs.
//! - [`seal`]: sealing and checking chain state.
//! - [`signature`]: Ed25519 keys and signatures.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod fleet;
pub mod keys;
pub mod seal;
pub mod signature;

#[cfg(test)]
mod tests;

pub use fleet::{Fleet, FleetKey, ReplyKey, ReplyProof, RunnerKeys};
pub use keys::{KeyError, KeyFile, KeyId, PublicKey, PublicKeys};
pub use seal::{SealKey, Sealed};
pub use signature::{Signature, Signing, SigningKey};

/// What a proof or a signature is for. Its tag starts the proved text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// A worker's reply to a runner (a decision or an error), bound to the request's digest.
    Reply,
    /// A reviewer service's record of a person's answer, bound to the sealed step task.
    HumanAnswer,
}

impl Domain {
    /// The tag that starts the proved text.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Reply => "airlock/v1/reply",
            Self::HumanAnswer => "airlock/v1/human-answer",
        }
    }
}

/// Why a proof or a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The message carries no proof at all.
    #[error("not signed")]
    Unsigned,
    /// The proof names a key the verifier does not hold.
    #[error("signed by unknown key {0}")]
    UnknownKey(KeyId),
    /// The proof does not match what it claims to prove.
    #[error("the signature does not match")]
    Invalid,
    /// A runner's public key that would make the agreed key predictable.
    #[error("the runner's public key is of small order")]
    WeakRunnerKey,
}

/// The SHA-256 digest of `bytes`, e.g. of a request exactly as a runner published it.
pub fn digest(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// The text a proof covers: the domain's tag, a NUL, the 32-byte digest, the payload. The tag
/// holds no NUL and the digest has a fixed length, so no two inputs share a text.
pub(crate) fn bound_text(domain: Domain, digest: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let tag = domain.tag().as_bytes();
    let mut text = Vec::with_capacity(tag.len() + 1 + digest.len() + payload.len());
    text.extend_from_slice(tag);
    text.push(0);
    text.extend_from_slice(digest);
    text.extend_from_slice(payload);
    text
}
