//! The fleet's key: workers prove their replies to runners with it, and seal chain state.
//!
//! Runners hold only the fleet's public X25519 key. Each runner makes an ephemeral X25519 key
//! when it starts and puts its public half in every request; a worker and that runner then
//! agree on a reply key (X25519, then HKDF-SHA256 over both public keys) that no one else can
//! compute, and every reply carries an HMAC-SHA256 under it. Nothing a runner holds can
//! prove a reply to another runner, and an agreement costs a worker one X25519 per runner
//! (kept), a reply one HMAC: far less than an Ed25519 signature and its verification.

use std::fmt;

use ring::{hkdf, hmac};
use x25519_dalek::{PublicKey as X25519Public, StaticSecret};

use crate::keys::{self, KeyError, KeyFile, KeyId, KeyKind, PublicKey, PublicKeys};
use crate::seal::SealKey;
use crate::{Domain, VerifyError, bound_text};

const REPLY_KEY_SALT: &[u8] = b"airlock/v1/reply-key";

/// Fleet key files (`airlock-fleet…`).
#[derive(Debug)]
pub enum Fleet {}

impl KeyKind for Fleet {
    const SECRET_TAG: &'static str = "airlock-fleet-secret";
    const PUBLIC_TAG: &'static str = "airlock-fleet";
}

// === impl FleetKey ===

/// The fleet's secret: an X25519 key that proves replies, and the seal key derived from it.
pub struct FleetKey {
    id: KeyId,
    seed: [u8; 32],
    secret: StaticSecret,
    public: [u8; 32],
}

impl KeyFile for FleetKey {
    type Kind = Fleet;
    const COMMENT: &'static str = "Airlock fleet key (X25519). Keep it secret: it makes replies runners accept.";

    fn from_seed(seed: [u8; 32]) -> Self {
        let secret = StaticSecret::from(seed);
        let public = X25519Public::from(&secret).to_bytes();
        Self { id: KeyId::of(&public), seed, secret, public }
    }

    /// The key's id, which every reply proof names.
    fn id(&self) -> &KeyId {
        &self.id
    }

    /// The public half, for runners.
    fn public_key(&self) -> PublicKey<Fleet> {
        PublicKey::new(self.public)
    }

    fn seed(&self) -> &[u8; 32] {
        &self.seed
    }
}

impl FleetKey {
    /// The reply key agreed with the runner whose public key is `runner`; refused for a key
    /// that would make the agreement predictable (a point of small order).
    pub fn reply_key(&self, runner: &[u8; 32]) -> Result<ReplyKey, VerifyError> {
        ReplyKey::agree(&self.secret, &self.id, &self.public, runner, runner)
    }

    /// The HMAC key that seals chain state: workers that share the fleet key share it, and
    /// nothing else can compute it.
    pub fn seal_key(&self) -> SealKey {
        SealKey::derive(&self.seed)
    }
}

impl fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetKey").field("id", &self.id).finish_non_exhaustive()
    }
}

// === impl RunnerKeys ===

/// A runner's side: its ephemeral public key, sent with every request, and the reply key
/// agreed with each fleet key it trusts.
pub struct RunnerKeys {
    public: [u8; 32],
    keys: Vec<ReplyKey>,
}

impl RunnerKeys {
    /// A new ephemeral key and its agreements with `fleet`'s keys.
    pub fn new(fleet: &PublicKeys<Fleet>) -> Result<Self, KeyError> {
        let secret = StaticSecret::from(keys::random_seed()?);
        let public = X25519Public::from(&secret).to_bytes();
        let keys = fleet
            .iter()
            .map(|key| {
                ReplyKey::agree(&secret, key.id(), key.bytes(), key.bytes(), &public)
                    .map_err(|_| KeyError::Weak(key.id().clone()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { public, keys })
    }

    /// The public key every request carries.
    pub fn public(&self) -> &[u8; 32] {
        &self.public
    }

    /// Checks that `proof` proves `payload` as a reply to the request whose digest is `digest`.
    pub fn verify(&self, digest: &[u8; 32], payload: &[u8], proof: &ReplyProof) -> Result<(), VerifyError> {
        let key = self
            .keys
            .iter()
            .find(|key| key.fleet_key == proof.key_id)
            .ok_or_else(|| VerifyError::UnknownKey(proof.key_id.clone()))?;
        hmac::verify(&key.key, &bound_text(Domain::Reply, digest, payload), &proof.tag)
            .map_err(|_| VerifyError::Invalid)
    }
}

impl fmt::Debug for RunnerKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnerKeys").finish_non_exhaustive()
    }
}

// === impl ReplyKey ===

/// The key one fleet key and one runner agreed on.
pub struct ReplyKey {
    fleet_key: KeyId,
    key: hmac::Key,
}

impl ReplyKey {
    /// X25519 of `secret` and `peer`, then HKDF-SHA256 over the fleet's and the runner's
    /// public keys (so each side derives the same key, bound to both).
    fn agree(
        secret: &StaticSecret,
        fleet_key: &KeyId,
        fleet: &[u8; 32],
        peer: &[u8; 32],
        runner: &[u8; 32],
    ) -> Result<Self, VerifyError> {
        let shared = secret.diffie_hellman(&X25519Public::from(*peer));
        if !shared.was_contributory() {
            return Err(VerifyError::WeakRunnerKey);
        }
        let info = [fleet.as_slice(), runner.as_slice()];
        let key = hkdf::Salt::new(hkdf::HKDF_SHA256, REPLY_KEY_SALT)
            .extract(shared.as_bytes())
            .expand(&info, hmac::HMAC_SHA256)
            .expect("HKDF-SHA256 gives 32 bytes")
            .into();
        Ok(Self { fleet_key: fleet_key.clone(), key })
    }

    /// The proof of `payload` as the reply to the request whose digest is `digest`.
    pub fn prove(&self, digest: &[u8; 32], payload: &[u8]) -> ReplyProof {
        let tag = hmac::sign(&self.key, &bound_text(Domain::Reply, digest, payload));
        ReplyProof {
            key_id: self.fleet_key.clone(),
            tag: tag.as_ref().try_into().expect("HMAC-SHA256 tags are 32 bytes"),
        }
    }
}

impl fmt::Debug for ReplyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyKey").field("fleet_key", &self.fleet_key).finish_non_exhaustive()
    }
}

/// What proves a reply: the fleet key's id and an HMAC-SHA256 tag.
#[derive(Clone, PartialEq, Eq)]
pub struct ReplyProof {
    /// The fleet key the reply key was agreed with.
    pub key_id: KeyId,
    /// The tag.
    pub tag: [u8; 32],
}

impl ReplyProof {
    /// A proof as the wire carries it: a key id and 32 bytes.
    pub fn from_wire(key_id: &str, tag: &[u8]) -> Result<Self, VerifyError> {
        if key_id.is_empty() && tag.is_empty() {
            return Err(VerifyError::Unsigned);
        }
        let tag = tag.try_into().map_err(|_| VerifyError::Invalid)?;
        Ok(Self { key_id: KeyId::from_wire(key_id), tag })
    }
}

impl fmt::Debug for ReplyProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyProof").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}
