//! The partition's rules, read and checked by `nft` itself where it runs.

use super::*;

fn cut_and_peers() -> ((Ipv4Addr, u16), Vec<(Ipv4Addr, u16)>) {
    let node = |port: u16| {
        let [high, low] = port.to_be_bytes();
        (Ipv4Addr::new(127, 1, high, low), port)
    };
    (node(40001), vec![node(40002), node(40003)])
}

#[test]
fn a_partition_drops_only_the_distribution_traffic_between_the_node_and_its_peers() {
    let (cut, peers) = cut_and_peers();
    let (table, rules) = partition_rules(cut, &peers);
    assert_eq!(table, "airlock_partition_40001");
    let drops: Vec<&str> = rules.lines().map(str::trim).filter(|line| line.ends_with("drop")).collect();
    assert_eq!(
        drops,
        [
            "oifname \"lo\" ip saddr 127.1.156.65 tcp dport { 40002, 40003 } drop",
            "oifname \"lo\" ip daddr 127.1.156.65 tcp sport { 40002, 40003 } drop",
            "oifname \"lo\" ip saddr { 127.1.156.66, 127.1.156.67 } tcp dport 40001 drop",
            "oifname \"lo\" ip daddr { 127.1.156.66, 127.1.156.67 } tcp sport 40001 drop",
        ],
        "{rules}"
    );
    // Never a client's port or the address every other process connects from.
    assert!(!rules.contains("5672") && !rules.contains("127.0.0.1"), "{rules}");
    assert!(rules.contains("policy accept"), "everything else passes: {rules}");
}

#[test]
fn nft_reads_the_rules() {
    let (cut, peers) = cut_and_peers();
    let (_, rules) = partition_rules(cut, &peers);
    // `--check` parses and validates without changing the packet filter.
    let Ok(mut child) = std::process::Command::new("nft")
        .args(["--check", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("skipping: no nft on this machine (Debian's nftables)");
        return;
    };
    use std::io::Write;
    child.stdin.take().expect("a pipe").write_all(rules.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "nft refused:\n{rules}\n{}", String::from_utf8_lossy(&output.stderr));
}
