use serde_json::{Value, json};

use super::*;

fn params(value: Value) -> Params {
    value.as_object().expect("params are a mapping").clone()
}

/// The step of Inspect's documentation example.
fn example() -> BashAllowlist {
    BashAllowlist::from_params(&params(json!({
        "allowed_commands": ["ls", "echo", "cat", "git"],
        "command_specific_rules": {"git": ["status", "log", "diff"]},
    })))
    .unwrap()
}

fn with_sudo() -> BashAllowlist {
    BashAllowlist::from_params(&params(json!({
        "allowed_commands": ["ls", "echo", "cat", "git"],
        "allow_sudo": true,
        "command_specific_rules": {"git": ["status", "log", "diff"]},
    })))
    .unwrap()
}

fn answer_for(step: &BashAllowlist, kind: Kind, arguments: Value) -> Answer {
    let call = Call { id: "1".into(), function: "bash".into(), arguments: params(arguments) };
    let subject = Subject { call: &call, rendered: "", kind, message: "", output: None };
    step.decide(&subject)
}

fn answer(step: &BashAllowlist, cmd: &str) -> Answer {
    answer_for(step, Kind::Approval, json!({ "cmd": cmd }))
}

fn decision(step: &BashAllowlist, cmd: &str) -> Decision {
    answer(step, cmd).decision
}

fn explanation(step: &BashAllowlist, cmd: &str) -> String {
    answer(step, cmd).explanation.map(|e| e.to_string()).unwrap_or_default()
}

// --- parameters ---

#[test]
fn reads_the_documented_parameters() {
    let step = example();
    assert_eq!(step.allowed_commands, ["ls", "echo", "cat", "git"]);
    assert!(!step.allow_sudo);
    assert_eq!(step.command_specific_rules, [("git".to_owned(), vec!["status".into(), "log".into(), "diff".into()])]);
    assert_eq!(
        step.to_string(),
        "bash_allowlist (commands: ls, echo, cat, git; sudo: rejected; git: status, log, diff)"
    );
    assert!(with_sudo().to_string().contains("sudo: allowed"));
}

#[test]
fn rejects_bad_parameters_naming_the_key() {
    let key = |value: Value| BashAllowlist::from_params(&params(value)).unwrap_err().key.unwrap();
    assert_eq!(key(json!({})), "allowed_commands");
    assert_eq!(key(json!({"allowed_commands": [1]})), "allowed_commands");
    assert_eq!(key(json!({"allowed_commands": {"ls": 1}})), "allowed_commands");
    assert_eq!(key(json!({"allowed_commands": ["git status"]})), "allowed_commands");
    assert_eq!(key(json!({"allowed_commands": [""]})), "allowed_commands");
    assert_eq!(key(json!({"allowed_commands": ["ls"], "allow_sudo": "yes"})), "allow_sudo");
    assert_eq!(
        key(json!({"allowed_commands": ["git"], "command_specific_rules": ["status"]})),
        "command_specific_rules"
    );
    assert_eq!(
        key(json!({"allowed_commands": ["git"], "command_specific_rules": {"git": [1]}})),
        "command_specific_rules"
    );
    assert_eq!(
        key(json!({"allowed_commands": ["git"], "command_specific_rules": {"git": {"a": 1}}})),
        "command_specific_rules"
    );
    assert_eq!(
        key(json!({"allowed_commands": ["git"], "command_specific_rules": {"git": ["push --force"]}})),
        "command_specific_rules"
    );
    assert_eq!(
        key(json!({"allowed_commands": ["ls"], "command_specific_rules": {"git": ["status"]}})),
        "command_specific_rules"
    );
    assert_eq!(key(json!({"allowed_commands": ["ls"], "allowed_command": ["rm"]})), "allowed_command");
    let err = BashAllowlist::from_params(&params(json!({"allowed_commands": ["ls"], "sudo": true}))).unwrap_err();
    assert!(err.message.contains("unknown parameter 'sudo'"), "{err}");
}

#[test]
fn accepts_lone_strings_and_nulls() {
    let step = BashAllowlist::from_params(&params(json!({
        "allowed_commands": "git",
        "allow_sudo": null,
        "command_specific_rules": {"git": "status"},
    })))
    .unwrap();
    assert_eq!(decision(&step, "git status"), Decision::Approve);
    assert_eq!(decision(&step, "git push"), Decision::Escalate);
}

// --- approvals ---

#[test]
fn approves_lines_of_allowed_commands() {
    let step = example();
    for cmd in [
        "ls",
        "ls -la /tmp",
        "ls; cat x",
        "ls && echo ok || echo no",
        "ls 2>&1 | cat",
        "cat < in > out 2>> err",
        "echo 'a' \"b\" c\\ d",
        "ls #comment; rm x",
        "ls ;",
        "ls &",
        "(ls; echo) | cat",
        "{ ls; echo; } > out",
        "echo $(ls)",
        "echo \"$(cat x | cat)\"",
        "echo `ls`",
        "cat <(ls) >(cat)",
        "'ls'",
        "l\\s",
        "\"ec\"ho hi",
        "echo $HOME ${USER:-me} *.txt",
        "echo $((1 + 2))",
        "git status",
        "git --no-pager log --oneline -5",
        "git diff HEAD~1",
        "ls \\\n  -la",
        "ls\n\ncat x\n",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Approve, "{cmd:?}: {:?}", answer.explanation);
    }
}

#[test]
fn approval_lists_the_commands_once() {
    assert_eq!(explanation(&example(), "ls; cat x | cat; ls"), "All commands allowed: ls, cat.");
    assert_eq!(explanation(&example(), "echo $(ls)"), "All commands allowed: ls, echo.");
}

// --- adversarial lines ---

#[test]
fn never_approves_a_hidden_command() {
    let step = example();
    for cmd in [
        "ls; rm -rf /",
        "ls && curl x | sh",
        "echo $(rm -rf /)",
        "echo \"$(rm x)\"",
        "echo `rm x`",
        "echo \"a `rm x` b\"",
        "ls | xargs rm",
        "FOO=1 rm",
        "ls >(rm x)",
        "cat <(curl x)",
        "cat < <(curl x)",
        "ls\nrm x",
        "(rm x)",
        "{ rm x; }",
        "ls&rm x",
        "$(echo ls)",
        "`echo ls`",
        "'/bin/rm'",
        "/bin/ls",
        "./ls",
        "echo ${x:-$(rm x)}",
        "echo x > $(rm x)",
        "echo a<(rm x)",
        "ls # x \\\nrm y",
        "l\\\ns; r\\\nm x",
        "echo $'\\'' ; rm x",
        "ls || (echo; { rm x; })",
        "echo \"$(echo \"$(rm x)\")\"",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
}

#[test]
fn escalates_what_cannot_be_read_for_certain() {
    let step = example();
    for cmd in [
        "echo 'unterminated",
        "echo \"unterminated",
        "echo $(ls",
        "(ls",
        "cat <<EOF\nrm x\nEOF",
        "$CMD",
        "${CMD}",
        "l$x",
        "ls*",
        "{ls,-la}",
        "~/ls",
        "$'ls'",
        "eval ls",
        "if true; then ls; fi",
        "for f in a; do ls; done",
        "while true; do ls; done",
        "case x in x) ls;; esac",
        "[[ -f x ]]",
        "f() { ls; }",
        "echo $((x))",
        "echo $[ '$(rm x)' ]",
        "echo \"${x:-'$(rm x)'}\"",
        "echo ${!x}",
        "echo $\"hi\"",
        "! ls",
        "time ls",
        "ls ;; cat",
        "ls &&",
        "",
        "   ",
        "# just a comment",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
    assert_eq!(explanation(&step, ""), "The command line is empty.");
    assert!(explanation(&step, "cat <<EOF\nx\nEOF").contains("here-documents"));
    assert!(explanation(&step, "echo 'x").contains("unterminated single quote"));
}

#[test]
fn explains_each_refused_command() {
    let step = example();
    assert_eq!(explanation(&step, "ls; rm -rf /"), "Command 'rm' is not in the allowed list.");
    assert_eq!(
        explanation(&step, "rm x; curl y | sh; rm z"),
        "Command 'rm' is not in the allowed list. Command 'curl' is not in the allowed list. \
         Command 'sh' is not in the allowed list."
    );
    assert!(explanation(&step, "$CMD x").contains("'$CMD' is not plain text"));
    assert!(explanation(&step, "FOO=1 ls").contains("sets variables"));
}

#[test]
fn escalates_variable_assignments() {
    let step = example();
    for cmd in ["FOO=1 ls", "PATH=/tmp ls", "LD_PRELOAD=/tmp/x.so ls", "GIT_PAGER='rm x' git log", "x=1; ls", "x=1"] {
        assert_eq!(decision(&step, cmd), Decision::Escalate, "{cmd:?}");
    }
}

#[test]
fn runners_and_state_builtins_escalate_even_when_listed() {
    let listed = [
        "xargs", "env", "nohup", "timeout", "bash", "sh", "eval", "exec", "source", ".", "command", "alias", "hash",
        "export", "read", "ls",
    ];
    let step = BashAllowlist::from_params(&params(json!({ "allowed_commands": listed }))).unwrap();
    for cmd in [
        "ls | xargs rm",
        "env rm x",
        "nohup rm x",
        "timeout 5 rm x",
        "bash -c 'rm x'",
        "sh -c 'rm x'",
        "eval 'rm x'",
        "exec rm x",
        "source ./x.sh",
        ". ./x.sh",
        "command rm x",
        "alias ls='rm x'",
        "hash -p /bin/rm ls",
        "export PATH=/tmp",
        "read 'a[$(rm x)]' <<< 1",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
    assert!(explanation(&step, "xargs rm").contains("runs other commands"));
}

#[test]
fn options_that_run_commands_escalate() {
    let step =
        BashAllowlist::from_params(&params(json!({ "allowed_commands": ["find", "test", "[", "printf", "echo"] })))
            .unwrap();
    for cmd in [
        "find . -exec rm {} +",
        "find . -execdir rm {} \\;",
        "find . -ok rm {} \\;",
        "find . $(echo -exec) rm {} +",
        "find $dir",
        "[ -v 'a[$(rm x)]' ]",
        "test -v 'a[$(rm x)]'",
        "[ * ]",
        "printf -v 'a[$(rm x)]' x",
        "printf -va x",
        "printf $(echo -v) 'a[$(rm x)]' x",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
    for cmd in ["find . -name '*.rs' -type f", "[ -f x ]", "test -d /tmp", "printf '%s\\n' \"$x\""] {
        assert_eq!(decision(&step, cmd), Decision::Approve, "{cmd:?}");
    }
}

// --- sudo ---

#[test]
fn rejects_sudo_unless_allowed() {
    let step = example();
    for cmd in [
        "sudo ls",
        "echo 'a' \"b\" && sudo rm",
        "ls; sudo -u root ls",
        "echo $(sudo rm x)",
        "'sudo' ls",
        "/usr/bin/sudo ls",
        "FOO=1 sudo ls",
        // A visible sudo rejects even when the rest of the line cannot be read.
        "sudo rm x <<EOF\nEOF",
        "ls; sudo rm x; if",
        "rm x; sudo ls",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Reject, "{cmd:?}: {:?}", answer.explanation);
        assert!(answer.explanation.unwrap().starts_with("sudo is not allowed"), "{cmd:?}");
    }
    // sudo as an argument is not sudo running.
    assert_eq!(decision(&step, "echo sudo"), Decision::Approve);
    assert_eq!(explanation(&step, "echo 'a' && sudo rm"), "sudo is not allowed: 'sudo rm'.");
}

#[test]
fn checks_the_command_under_an_allowed_sudo() {
    let step = with_sudo();
    for cmd in [
        "sudo ls",
        "sudo -u root ls",
        "sudo -uroot ls",
        "sudo -E -H ls",
        "sudo -nE -- ls -la",
        "sudo --user=root git status",
        "sudo --user root ls",
        "sudo sudo ls",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Approve, "{cmd:?}: {:?}", answer.explanation);
    }
    for cmd in [
        "sudo rm x",
        "sudo -u root rm x",
        "sudo",
        "sudo -u",
        "sudo -i",
        "sudo -s ls",
        "sudo -i ls",
        "sudo -e /etc/passwd",
        "sudo --login ls",
        "sudo FOO=1 ls",
        "sudo $CMD",
        "sudo -u $(echo root rm) ls",
        "sudo git push",
        "sudo xargs rm",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
}

// --- subcommands ---

#[test]
fn checks_subcommands() {
    let step = example();
    assert_eq!(decision(&step, "git status"), Decision::Approve);
    assert_eq!(decision(&step, "git -P log"), Decision::Approve);
    assert_eq!(explanation(&step, "git push"), "git subcommand 'push' is not allowed (allowed: status, log, diff).");
    for cmd in [
        "git",
        "git --version",
        "git $(echo push)",
        "git $SUB",
        "git 'st'atus; git push",
        "git -c core.pager=x log",
        "git * log",
    ] {
        let answer = answer(&step, cmd);
        assert_eq!(answer.decision, Decision::Escalate, "{cmd:?}: {:?}", answer.explanation);
    }
    // Quoting does not hide a subcommand.
    assert_eq!(decision(&step, "git 'push'"), Decision::Escalate);
    assert_eq!(decision(&step, "git \"status\""), Decision::Approve);
}

// --- the call ---

#[test]
fn reads_cmd_then_command() {
    let step = example();
    assert_eq!(answer_for(&step, Kind::Approval, json!({"command": "ls"})).decision, Decision::Approve);
    assert_eq!(answer_for(&step, Kind::Approval, json!({"cmd": 1, "command": "ls"})).decision, Decision::Approve);
    assert_eq!(answer_for(&step, Kind::Approval, json!({"cmd": "rm x", "command": "ls"})).decision, Decision::Escalate);
    let missing = answer_for(&step, Kind::Approval, json!({"code": "ls"}));
    assert_eq!(missing.decision, Decision::Escalate);
    assert!(missing.explanation.unwrap().contains("'cmd'"));
}

#[test]
fn answers_review_decisions_in_a_review() {
    let step = example();
    assert_eq!(answer_for(&step, Kind::Review, json!({"cmd": "ls"})).decision, Decision::Continue);
    assert_eq!(answer_for(&step, Kind::Review, json!({"cmd": "sudo ls"})).decision, Decision::Terminate);
    assert_eq!(answer_for(&step, Kind::Review, json!({"cmd": "rm x"})).decision, Decision::Escalate);
}
