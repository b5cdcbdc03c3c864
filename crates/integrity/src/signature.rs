//! Ed25519 signatures: a reviewer service vouches for the answers of the people it serves.

use std::fmt;

use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::keys::{KeyFile, KeyId, KeyKind, PublicKey, PublicKeys};
use crate::{Domain, VerifyError, bound_text};

/// Ed25519 key files (`airlock-ed25519…`).
#[derive(Debug)]
pub enum Signing {}

impl KeyKind for Signing {
    const SECRET_TAG: &'static str = "airlock-ed25519-secret";
    const PUBLIC_TAG: &'static str = "airlock-ed25519";
}

/// An Ed25519 signing key with its id.
pub struct SigningKey {
    id: KeyId,
    pair: Ed25519KeyPair,
    seed: [u8; 32],
}

impl KeyFile for SigningKey {
    type Kind = Signing;
    const COMMENT: &'static str = "Airlock signing key (Ed25519). Keep it secret.";

    fn from_seed(seed: [u8; 32]) -> Self {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are an Ed25519 seed");
        let public = public_bytes(&pair);
        Self { id: KeyId::of(&public), pair, seed }
    }

    /// The key's id, which every signature it makes names.
    fn id(&self) -> &KeyId {
        &self.id
    }

    /// The public half, to give to verifiers.
    fn public_key(&self) -> PublicKey<Signing> {
        PublicKey::new(public_bytes(&self.pair))
    }

    fn seed(&self) -> &[u8; 32] {
        &self.seed
    }
}

impl SigningKey {
    /// Signs `payload` for `domain`, bound to `digest` (e.g. of the task being answered).
    pub fn sign(&self, domain: Domain, digest: &[u8; 32], payload: &[u8]) -> Signature {
        let signature = self.pair.sign(&bound_text(domain, digest, payload));
        Signature {
            key_id: self.id.clone(),
            bytes: signature.as_ref().try_into().expect("Ed25519 signatures are 64 bytes"),
        }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).finish_non_exhaustive()
    }
}

fn public_bytes(pair: &Ed25519KeyPair) -> [u8; 32] {
    pair.public_key().as_ref().try_into().expect("Ed25519 public keys are 32 bytes")
}

impl PublicKeys<Signing> {
    /// Checks that `signature` is a held key's signature over `payload` for `domain`, bound
    /// to `digest`.
    pub fn verify(
        &self,
        domain: Domain,
        digest: &[u8; 32],
        payload: &[u8],
        signature: &Signature,
    ) -> Result<(), VerifyError> {
        let key = self.get(&signature.key_id).ok_or_else(|| VerifyError::UnknownKey(signature.key_id.clone()))?;
        UnparsedPublicKey::new(&ED25519, key.bytes())
            .verify(&bound_text(domain, digest, payload), &signature.bytes)
            .map_err(|_| VerifyError::Invalid)
    }
}

/// An Ed25519 signature and the id of the key that made it.
#[derive(Clone, PartialEq, Eq)]
pub struct Signature {
    /// The signing key's id.
    pub key_id: KeyId,
    /// The signature.
    pub bytes: [u8; 64],
}

impl Signature {
    /// A signature as the wire carries it: a key id and 64 bytes.
    pub fn from_wire(key_id: &str, bytes: &[u8]) -> Result<Self, VerifyError> {
        if key_id.is_empty() && bytes.is_empty() {
            return Err(VerifyError::Unsigned);
        }
        let bytes = bytes.try_into().map_err(|_| VerifyError::Invalid)?;
        Ok(Self { key_id: KeyId::from_wire(key_id), bytes })
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signature").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}
