//! Skills (Agent Skills: folders with a `SKILL.md`) through the real `dsh` binary (SPEC A10):
//! listed by name and description in the system prompt, loaded on demand by the read-only
//! `skill` tool with the files of their folder, which it reads confined to that folder; an
//! untrusted project's skills are ignored with the notice; a malformed front matter is a
//! one-line warning naming the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Dirs, kind, records, scripted_exec, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A user skill `release` with a reference file and a script.
fn user_skill(d: &Dirs) {
    let dir = d.cfg.join("skills/release");
    write(
        &dir.join("SKILL.md"),
        "---\nname: release\ndescription: Cut a release of this project. Use when asked to release or tag.\nlicense: MIT\n---\n# Releasing\n\n1. Read reference.md.\n2. Run scripts/tag.sh.\n",
    );
    write(&dir.join("reference.md"), "The version lives in VERSION.\n");
    write(&dir.join("scripts/tag.sh"), "#!/bin/sh\ngit tag \"$1\"\n");
}

fn skill(id: &str, args: Value) -> Reply {
    Turn::tool_call(id, "skill", &args.to_string()).into()
}

fn results(d: &Dirs) -> Vec<Value> {
    records(&common::journals(&d.home)[0])
        .into_iter()
        .filter(|r| r["kind"] == "tool_result")
        .collect()
}

#[test]
fn a_skill_is_listed_then_loaded_on_demand_and_its_files_read_within_its_folder() {
    let d = Dirs::new();
    d.write_user_config("");
    user_skill(&d);
    std::fs::write(d.cfg.join("secret.txt"), "not for the model").unwrap();
    let server = ScriptedServer::start(vec![
        skill("s1", json!({"name": "release"})),
        skill("s2", json!({"name": "release", "file": "reference.md"})),
        skill("s3", json!({"name": "release", "file": "../secret.txt"})),
        skill("s4", json!({"name": "release", "file": "/etc/passwd"})),
        Reply::text("released"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "release 1.2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- release: Cut a release of this project."),
        "{system}"
    );
    assert!(
        !system.contains("Run scripts/tag.sh"),
        "the body waits: {system}"
    );
    let r = results(&d);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let body = r[0]["content"].as_str().unwrap();
    assert!(body.contains("2. Run scripts/tag.sh."), "{body}");
    assert!(
        body.contains("- reference.md") && body.contains("- scripts/tag.sh"),
        "{body}"
    );
    assert!(
        !body.contains("license: MIT"),
        "the front matter is not the body: {body}"
    );
    assert_eq!(
        r[0]["value"]["files"],
        json!(["reference.md", "scripts/tag.sh"])
    );
    assert_eq!(r[1]["content"], "The version lives in VERSION.\n");
    for refused in &r[2..4] {
        assert_eq!(kind(refused), "invalid_args", "{refused}");
        assert!(
            !refused["content"]
                .as_str()
                .unwrap()
                .contains("not for the model")
        );
    }
}

#[test]
fn a_symlink_out_of_the_skill_folder_is_refused() {
    let d = Dirs::new();
    d.write_user_config("");
    user_skill(&d);
    std::fs::write(d.outside.join("private.key"), "KEY").unwrap();
    std::os::unix::fs::symlink(
        d.outside.join("private.key"),
        d.cfg.join("skills/release/key.txt"),
    )
    .unwrap();
    let server = ScriptedServer::start(vec![
        skill("s1", json!({"name": "release", "file": "key.txt"})),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "go").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = results(&d);
    assert_eq!(kind(&r[0]), "invalid_args", "{r:?}");
    assert!(
        r[0]["content"]
            .as_str()
            .unwrap()
            .contains("out of the skill's folder")
    );
}

#[test]
fn project_skills_need_trust_and_a_malformed_one_is_a_warning() {
    let d = Dirs::new();
    d.write_user_config("");
    write(
        &d.ws.join(".claude/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint the code the team's way.\n---\nRun make lint.\n",
    );
    write(
        &d.ws.join(".dsh/skills/broken/SKILL.md"),
        "---\nname: Broken Name\ndescription: x\n---\n",
    );
    let server = ScriptedServer::start(vec![Reply::text("ok")]);
    let out = scripted_exec(&d, &server.url, &[], "hi").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("ignored skills"), "{err}");
    let system = server.requests()[0]["messages"][0]["content"].to_string();
    assert!(!system.contains("lint"), "{system}");

    let trusted = d.dsh(&["trust"]).output().unwrap();
    assert!(trusted.status.success());
    let server = ScriptedServer::start(vec![
        skill("s1", json!({"name": "lint"})),
        Reply::text("ok"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "lint it")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(".dsh/skills/broken/SKILL.md: skill left out:")
            && err.contains("\"Broken Name\""),
        "{err}"
    );
    let system = server.requests()[0]["messages"][0]["content"].to_string();
    assert!(
        system.contains("- lint: Lint the code the team's way."),
        "{system}"
    );
    let r = common::journals(&d.home)
        .iter()
        .flat_map(|j| records(j))
        .find(|r| r["kind"] == "tool_result")
        .unwrap();
    assert_eq!(kind(&r), "ok", "{r}");
    assert!(r["content"].as_str().unwrap().contains("Run make lint."));
}

#[test]
fn a_deny_rule_reaches_a_project_skills_files() {
    let d = Dirs::new();
    write(
        &d.ws.join(".dsh/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint.\n---\nbody\n",
    );
    write(&d.ws.join(".dsh/skills/lint/notes.env"), "TOKEN=x\n");
    let out = d.dsh(&["trust"]).output().unwrap();
    assert!(out.status.success());
    d.write_user_config(&format!(
        "{}\n[permissions]\ndeny = [\"read_file(**/*.env)\"]\n",
        std::fs::read_to_string(d.cfg.join("config.toml")).unwrap()
    ));
    let out = d.batch_output(
        &[json!({"name": "skill", "args": {"name": "lint", "file": "notes.env"}})],
        &[],
        &[],
    );
    let r = common::json_lines(&out);
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert_eq!(r[0]["decided_by"]["policy"], "permissions", "{r:?}");
}
