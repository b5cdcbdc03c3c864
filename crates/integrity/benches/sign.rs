//! What proving costs per decision, against the Ed25519 signature it replaces on the hot
//! path: a worker proves each reply and a runner checks it; a worker seals and checks the
//! chain state of each external step; a worker agrees once per runner.

use airlock_integrity::{Domain, FleetKey, KeyFile as _, PublicKeys, RunnerKeys, SigningKey, digest};
use criterion::{Criterion, criterion_group, criterion_main};

fn proofs(c: &mut Criterion) {
    let fleet = FleetKey::generate().expect("a key");
    let runner = RunnerKeys::new(&PublicKeys::from(fleet.public_key())).expect("runner keys");
    let reply_key = fleet.reply_key(runner.public()).expect("agreement");
    // About the size of an encoded decision with a three-step trail, and of a request.
    let reply = vec![0x5a; 600];
    let request = vec![0xa5; 1536];
    let request_digest = digest(&request);
    let proof = reply_key.prove(&request_digest, &reply);
    let seal_key = fleet.seal_key();
    let seal = seal_key.seal(&[&request_digest, &reply]);
    let signing = SigningKey::generate().expect("a key");
    let signing_keys = PublicKeys::from(signing.public_key());
    let signature = signing.sign(Domain::Reply, &request_digest, &reply);

    c.bench_function("digest 1.5 KB request", |b| b.iter(|| digest(&request)));
    c.bench_function("agree with a runner (once per runner)", |b| b.iter(|| fleet.reply_key(runner.public())));
    c.bench_function("prove 600 B reply", |b| b.iter(|| reply_key.prove(&request_digest, &reply)));
    c.bench_function("verify 600 B reply", |b| {
        b.iter(|| runner.verify(&request_digest, &reply, &proof).expect("valid"))
    });
    c.bench_function("seal 600 B chain state", |b| b.iter(|| seal_key.seal(&[&request_digest, &reply])));
    c.bench_function("check 600 B chain state", |b| b.iter(|| seal_key.check(&[&request_digest, &reply], &seal.0)));
    c.bench_function("Ed25519 sign 600 B", |b| b.iter(|| signing.sign(Domain::Reply, &request_digest, &reply)));
    c.bench_function("Ed25519 verify 600 B", |b| {
        b.iter(|| signing_keys.verify(Domain::Reply, &request_digest, &reply, &signature).expect("valid"))
    });
}

criterion_group!(benches, proofs);
criterion_main!(benches);
