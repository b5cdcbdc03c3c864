//! Ed25519 signatures: a reviewer service vouches for the answers of the people it serves.

use std::fmt;
use std::path::Path;

use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::keys::{self, KeyError, KeyId, KeyKind, PublicKey, PublicKeys};
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

impl SigningKey {
    /// A new random key.
    pub fn generate() -> Result<Self, KeyError> {
        Ok(Self::from_seed(keys::random_seed()?))
    }

    /// The key whose 32-byte seed is `seed`.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are an Ed25519 seed");
        let public = public_bytes(&pair);
        Self { id: KeyId::of(&public), pair, seed }
    }

    /// Reads the key from a key file's text; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, KeyError> {
        let seed = keys::parse_secret::<Signing>(text, source_name, |seed| Self::from_seed(*seed).id)?;
        Ok(Self::from_seed(seed))
    }

    /// Reads the key file at `path`.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        Self::parse(&keys::read(path)?, &path.display().to_string())
    }

    /// Writes a new key into `dir` as `<name>.key` (readable by its owner only) and
    /// `<name>.pub`, refusing to overwrite either, and returns it.
    pub fn generate_files(dir: &Path, name: &str) -> Result<Self, KeyError> {
        let key = Self::generate()?;
        let public = PublicKeys::from(key.public_key()).to_file_text();
        keys::write_pair(dir, name, &key.to_file_text(), &public)?;
        Ok(key)
    }

    /// The key's id, which every signature it makes names.
    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The public half, to give to verifiers.
    pub fn public_key(&self) -> PublicKey<Signing> {
        PublicKey::new(public_bytes(&self.pair))
    }

    /// Signs `payload` for `domain`, bound to `digest` (e.g. of the task being answered).
    pub fn sign(&self, domain: Domain, digest: &[u8; 32], payload: &[u8]) -> Signature {
        let signature = self.pair.sign(&bound_text(domain, digest, payload));
        Signature {
            key_id: self.id.clone(),
            bytes: signature.as_ref().try_into().expect("Ed25519 signatures are 64 bytes"),
        }
    }

    /// The key file's text.
    pub fn to_file_text(&self) -> String {
        keys::secret_file_text::<Signing>("Airlock signing key (Ed25519). Keep it secret.", &self.id, &self.seed)
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
