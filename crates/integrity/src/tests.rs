use super::*;

fn payload() -> Vec<u8> {
    b"a decision: approve call_1".to_vec()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("airlock-keys-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

// === replies ===

#[test]
fn a_reply_proof_holds_only_for_its_runner_request_and_payload() {
    let fleet = FleetKey::generate().unwrap();
    let runner = RunnerKeys::new(&PublicKeys::from(fleet.public_key())).unwrap();
    let request = digest(b"the request");
    let proof = fleet.reply_key(runner.public()).unwrap().prove(&request, &payload());
    assert_eq!(runner.verify(&request, &payload(), &proof), Ok(()));

    // Another payload, another request: refused.
    assert_eq!(runner.verify(&request, b"a decision: approve call_2", &proof), Err(VerifyError::Invalid));
    assert_eq!(runner.verify(&digest(b"another"), &payload(), &proof), Err(VerifyError::Invalid));
    // A flipped bit in the tag.
    for bit in [0, 130, 255] {
        let mut forged = proof.clone();
        forged.tag[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(runner.verify(&request, &payload(), &forged), Err(VerifyError::Invalid));
    }
    // A proof made for one runner does not hold for another runner of the same fleet.
    let other = RunnerKeys::new(&PublicKeys::from(fleet.public_key())).unwrap();
    assert_eq!(other.verify(&request, &payload(), &proof), Err(VerifyError::Invalid));
}

#[test]
fn a_forger_without_the_fleet_key_cannot_prove_a_reply() {
    let fleet = FleetKey::generate().unwrap();
    let runner = RunnerKeys::new(&PublicKeys::from(fleet.public_key())).unwrap();
    let request = digest(b"the request");
    // An attacker who saw the runner's public key in a request agrees with a key of its own.
    let attacker = FleetKey::generate().unwrap();
    let forged = attacker.reply_key(runner.public()).unwrap().prove(&request, &payload());
    assert_eq!(runner.verify(&request, &payload(), &forged), Err(VerifyError::UnknownKey(attacker.id().clone())));
    let relabelled = ReplyProof { key_id: fleet.id().clone(), ..forged };
    assert_eq!(runner.verify(&request, &payload(), &relabelled), Err(VerifyError::Invalid));
    // An unsigned reply, and a short tag.
    assert_eq!(ReplyProof::from_wire("", &[]).unwrap_err(), VerifyError::Unsigned);
    assert_eq!(ReplyProof::from_wire(fleet.id().as_str(), &[0; 31]).unwrap_err(), VerifyError::Invalid);
}

#[test]
fn a_runner_key_of_small_order_is_refused() {
    let fleet = FleetKey::generate().unwrap();
    // Zero and a point of order 8 on Curve25519: with either, every secret agrees to zeros.
    let order_eight: Vec<u8> = (0..32)
        .map(|i| {
            u8::from_str_radix(&"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"[2 * i..][..2], 16)
                .unwrap()
        })
        .collect();
    let order_eight: [u8; 32] = order_eight.try_into().unwrap();
    for weak in [[0u8; 32], order_eight] {
        assert_eq!(fleet.reply_key(&weak).unwrap_err(), VerifyError::WeakRunnerKey);
    }
}

#[test]
fn a_runner_trusts_every_fleet_key_during_a_rotation() {
    let old = FleetKey::generate().unwrap();
    let new = FleetKey::generate().unwrap();
    let text = format!("{}{}", PublicKeys::from(old.public_key()).to_file_text(), new.public_key().to_line());
    let runner = RunnerKeys::new(&PublicKeys::<Fleet>::parse(&text, "fleet.pub").unwrap()).unwrap();
    let request = digest(b"r");
    for key in [&old, &new] {
        let proof = key.reply_key(runner.public()).unwrap().prove(&request, &payload());
        assert_eq!(runner.verify(&request, &payload(), &proof), Ok(()));
    }
}

// === human answers ===

#[test]
fn a_signature_verifies_only_for_what_it_signed_and_by_a_held_key() {
    let reviewer = SigningKey::generate().unwrap();
    let keys = PublicKeys::from(reviewer.public_key());
    let task = digest(b"the sealed task");
    let signature = reviewer.sign(Domain::HumanAnswer, &task, &payload());
    assert_eq!(keys.verify(Domain::HumanAnswer, &task, &payload(), &signature), Ok(()));
    assert_eq!(keys.verify(Domain::HumanAnswer, &task, b"approve by mallory", &signature), Err(VerifyError::Invalid));
    assert_eq!(keys.verify(Domain::HumanAnswer, &digest(b"x"), &payload(), &signature), Err(VerifyError::Invalid));
    assert_eq!(keys.verify(Domain::Reply, &task, &payload(), &signature), Err(VerifyError::Invalid));

    let attacker = SigningKey::generate().unwrap();
    let forged = attacker.sign(Domain::HumanAnswer, &task, &payload());
    assert_eq!(
        keys.verify(Domain::HumanAnswer, &task, &payload(), &forged),
        Err(VerifyError::UnknownKey(attacker.id().clone()))
    );
    let relabelled = Signature { key_id: reviewer.id().clone(), ..forged };
    assert_eq!(keys.verify(Domain::HumanAnswer, &task, &payload(), &relabelled), Err(VerifyError::Invalid));
    assert_eq!(Signature::from_wire("", &[]).unwrap_err(), VerifyError::Unsigned);
    assert_eq!(Signature::from_wire("abc", &[0; 63]).unwrap_err(), VerifyError::Invalid);
}

// === seals ===

#[test]
fn a_seal_holds_only_for_its_key_and_parts() {
    let key = FleetKey::generate().unwrap();
    let seal_key = key.seal_key();
    let seal = seal_key.seal(&[b"request digest", b"next step 3"]);
    assert!(seal_key.check(&[b"request digest", b"next step 3"], &seal.0));
    assert!(!seal_key.check(&[b"request digest", b"next step 4"], &seal.0));
    // Moving bytes between parts changes the seal: parts are framed.
    assert!(!seal_key.check(&[b"request digestn", b"ext step 3"], &seal.0));
    assert!(!seal_key.check(&[b"request digest", b"next step 3"], &seal.0[..31]));
    // Another worker with the same fleet key seals alike; another key does not.
    let same = FleetKey::parse(&key.to_file_text(), "fleet.key").unwrap();
    assert!(same.seal_key().check(&[b"request digest", b"next step 3"], &seal.0));
    assert!(!FleetKey::generate().unwrap().seal_key().check(&[b"request digest", b"next step 3"], &seal.0));
}

// === key files ===

#[test]
fn key_files_round_trip_and_secrets_are_private() {
    let dir = scratch("files");
    let fleet = FleetKey::generate_files(&dir, "fleet").unwrap();
    let reviewer = SigningKey::generate_files(&dir, "reviewer").unwrap();
    assert_eq!(FleetKey::load(&dir.join("fleet.key")).unwrap().public_key(), fleet.public_key());
    assert_eq!(SigningKey::load(&dir.join("reviewer.key")).unwrap().public_key(), reviewer.public_key());
    let fleet_public = PublicKeys::<Fleet>::load([dir.join("fleet.pub")]).unwrap();
    assert_eq!(fleet_public.iter().collect::<Vec<_>>(), vec![&fleet.public_key()]);
    let reviewer_public = PublicKeys::<Signing>::load([dir.join("reviewer.pub")]).unwrap();
    assert_eq!(reviewer_public.iter().collect::<Vec<_>>(), vec![&reviewer.public_key()]);
    #[cfg(unix)]
    for secret in ["fleet.key", "reviewer.key"] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join(secret)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{secret} is readable by others: {mode:o}");
    }
    // A second generate never overwrites a key.
    assert!(matches!(FleetKey::generate_files(&dir, "fleet"), Err(KeyError::Io { .. })));
    // One kind's file is not read as another's.
    let error = PublicKeys::<Signing>::load([dir.join("fleet.pub")]).unwrap_err().to_string();
    assert!(error.ends_with("fleet.pub:2: expected 'airlock-ed25519 <key id> <hex>'"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_key_files_say_where() {
    let key = SigningKey::generate().unwrap();
    let public_line = key.public_key().to_line();
    let cases = [
        ("# nothing\n\n".to_owned(), "keys.pub: no key in it"),
        ("airlock-ed25519 abc 00\n".to_owned(), "keys.pub:1: the key is not 64 hex digits"),
        ("\nssh-ed25519 AAAA\n".to_owned(), "keys.pub:2: expected 'airlock-ed25519 <key id> <hex>'"),
        (key.to_file_text(), "keys.pub:2: expected a 'airlock-ed25519' key, found 'airlock-ed25519-secret'"),
    ];
    for (text, expected) in cases {
        assert_eq!(PublicKeys::<Signing>::parse(&text, "keys.pub").unwrap_err().to_string(), expected);
    }
    let wrong_id = public_line.replace(key.id().as_str(), "0000000000000000");
    let error = PublicKeys::<Signing>::parse(&wrong_id, "keys.pub").unwrap_err().to_string();
    assert!(error.starts_with("keys.pub:1: key id 0000000000000000 does not belong"), "{error}");

    let two = format!("{}{}", key.to_file_text(), SigningKey::generate().unwrap().to_file_text());
    let error = SigningKey::parse(&two, "reviewer.key").unwrap_err().to_string();
    assert_eq!(error, "reviewer.key:4: a secret key file holds exactly one key");
    let error = SigningKey::parse(&public_line, "reviewer.key").unwrap_err().to_string();
    assert_eq!(error, "reviewer.key:1: expected a 'airlock-ed25519-secret' key, found 'airlock-ed25519'");
}
