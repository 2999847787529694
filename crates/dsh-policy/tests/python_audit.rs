//! Stage 3 of the shell policy: Python is audited before it runs. Evasions of the seed's deny
//! list are refused (aliases, `from … import`, NFKC-equal identifiers, computed `getattr`,
//! `importlib`, `__builtins__`, decorators, dunder walking, shadowing local modules, missing
//! or unparseable scripts); ordinary scripts pass; the shell policy denies at tier `Rule` on a
//! refusal and otherwise leaves python on the confirm list (`ask`); and the audit runs again
//! at gate 3, so a script changed after gate 1 is refused just before it would run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, CancellationToken, FailureKind,
    Gate, Pipeline, Registry, Tier, ToolCall, ToolOutput, Workspace, async_trait,
};
use dsh_core::{Layer, Origin, Rule};
use dsh_policy::python::{audit_file, audit_source};
use dsh_policy::{Decision, NetworkVote, PythonAuditGuard, ShellLists, ShellPolicy};
use dsh_testkit::FnTool;
use serde_json::json;

/// A rule from its text, through the one grammar (dsh-core's), written where `origin` says:
/// a layer's name, then the file if any (`user`, `untrusted project /p/.dsh/config.toml`).
fn parse_rule(kind: Decision, text: &str, origin: &str) -> Rule {
    let (layer, file) = [Layer::UntrustedProject, Layer::Project, Layer::User]
        .into_iter()
        .find_map(|l| Some((l, origin.strip_prefix(l.as_str())?)))
        .unwrap_or_else(|| panic!("{origin:?} names no layer"));
    let origin = Origin {
        layer,
        path: file.strip_prefix(' ').map(Into::into),
        ..Origin::builtin()
    };
    Rule::parse(kind, text, origin).unwrap()
}

fn workspace() -> (tempfile::TempDir, Arc<Workspace>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("data.txt"), "hello\n").unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    (dir, ws)
}

fn policy(ws: &Arc<Workspace>, rules: &[(Decision, &str)]) -> ShellPolicy {
    let rules = rules.iter().map(|(k, t)| parse_rule(*k, t, "user"));
    ShellPolicy::new(
        ws.clone(),
        rules,
        ShellLists::default(),
        NetworkVote::Refused,
    )
}

/// Sources that must be refused, each with why it is an evasion.
const EVASIONS: &[&str] = &[
    "import os; os.system('x')",
    "import os as o\no.system('x')",
    "from os import system as s; s('x')",
    "from os import popen",
    "import subprocess as sp; sp.run(['ls'])",
    "from subprocess import Popen",
    "import subprocess.run",
    "__import__('os').system('x')",
    "import os\ngetattr(os, 'sys' + 'tem')('x')",
    "getattr(print, 'sys' + 'tem')",
    "getattr(x, name)",
    "g = getattr\ng(x, 'y')",
    "import importlib; importlib.import_module('os')",
    "x.import_module('os')",
    "__builtins__.__dict__['eval']('1')",
    "__builtins__['eval']('1')",
    "eval('1')",
    "exec('print(1)')",
    "compile('1', 'f', 'eval')",
    "f = eval\nf('1')",
    "ｅｖａｌ('1')",
    "𝐞𝐯𝐚𝐥('1')",
    "from os import *\nsystem('x')",
    "import shutil; shutil.rmtree('/')",
    "from shutil import rmtree",
    "import shutil as s\ns.move('a', 'b')",
    "import socket; socket.socket()",
    "from socket import create_connection",
    "import os\n@os.system\ndef f(): pass",
    "@eval\ndef f(): pass",
    "().__class__.__mro__[1].__subclasses__()",
    "''.__class__.__base__",
    "(lambda: 0).__globals__['__builtins__']",
    "globals()['__builtins__']",
    "locals()",
    "vars(x)['y']",
    "import sys; sys.modules['os'].system('x')",
    "import sys as s\nm = s.modules",
    "import ctypes",
    "import ctypes.util",
    "import os; os.remove('x')",
    "import os; os.unlink('x')",
    "import os; os.rename('a', 'b')",
    "import os; os.execv('/bin/sh', ['sh'])",
    "import os; os.spawnl(0, '/bin/sh')",
    "import os; os.kill(1, 9)",
    "import os\nm = os\nm.system('x')",
    "import os\ndef f(m): return m\nf(os).getcwd()",
    "import glob; glob.os.system('x')",
    "import tempfile; tempfile._os.system('x')",
    "import pty; pty.spawn('sh')",
    "from pathlib import Path\nPath('x').unlink()",
    "import shutil\nfrom pathlib import Path\nPath('d').rmdir()",
    "import pickle; pickle.loads(b'')",
    "import builtins; builtins.eval('1')",
    "import multiprocessing",
    "import inspect; inspect.currentframe().f_back.f_globals",
    "import operator; operator.attrgetter('system')",
    "from . import helper",
    "table = {'a': print}\ntable['a']()",
    "make()()",
    "import asyncio\nasyncio.create_subprocess_shell('x')",
    "print 'python 2'",
    "exec 'x'",
    "def f(:\n  pass",
    "x = (",
    "# -*- coding: unicode_escape -*-\nprint(1)",
    "setattr(x, 'y' + z, 1)",
    "getattr(x, '__class__')",
    "getattr(x, 'system')",
    "import http.server",
    "from urllib.request import urlopen",
    "async def f():\n    import asyncio.subprocess",
    "import timeit; timeit.timeit('x')",
    "import typing; typing.get_type_hints(f)",
    "help('os')",
    "from unittest import mock",
    "import json\nf(json)",
    "import glob as g\nh = g\nh.os.remove('x')",
    "from glob import os as o\nx = o",
    "from glob import os as o\no.remove('x')",
    "import sys\nsys.path.insert(0, 'lib')\nimport helper",
    "import os\nos.chdir('lib')",
    "import site; site.addsitedir('lib')",
    // A lone carriage return ends a line for Python, not for a comment in tree-sitter.
    "# note\rimport os\ros.system('x')",
    "x = 1 # c\x0bimport os\x0bos.system('x')",
];

/// Ordinary scripts that must pass.
const ORDINARY: &[&str] = &[
    "print(1 + 2 * 3)",
    "x = [i * i for i in range(10) if i % 2]\nprint(sum(x), max(x))",
    "import json, math, re, collections\nc = collections.Counter('hello')\nprint(json.dumps({'a': math.pi}), re.findall(r'l', 'hello'), c)",
    "with open('data.txt') as f:\n    for line in f:\n        print(line.strip())",
    "with open('out.txt', 'w') as f:\n    f.write('ok')",
    "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __repr__(self):\n        return f'Point({self.x}, {self.y})'\n\ndef norm(p):\n    return (p.x ** 2 + p.y ** 2) ** 0.5\n\nprint(norm(Point(3, 4)))",
    "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int, default=3)\nargs = p.parse_args()\nprint(args.n)",
    "from pathlib import Path\nprint(Path('data.txt').read_text())",
    "import os\nprint(os.path.join('a', 'b'), os.getcwd(), os.environ.get('HOME'))",
    "import os.path\nprint(os.path.exists('x'))",
    "from os import path as p\nprint(p.basename('a/b'))",
    "import sys\nprint(sys.argv[1:], file=sys.stderr)\nsys.exit(0)",
    "from dataclasses import dataclass, field\n@dataclass\nclass A:\n    xs: list = field(default_factory=list)\nprint(A())",
    "from math import *\nprint(sqrt(2))",
    "import functools\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nprint(fib(30))",
    "import re\nfor m in re.compile(r'\\d+').finditer('a1b22'):\n    print(m.group(0))",
    "words = 'b a c'.split()\nwords.sort(key=lambda w: w)\nwords.remove('a')\nprint(' '.join(words).replace('b', 'B'))",
    "print(getattr(3, 'real'), hasattr(3, 'imag'))",
    "async def main():\n    return 1\nimport asyncio\nprint(asyncio.run(main()))",
    "# -*- coding: utf-8 -*-\nprint((lambda x: x + 1)(1))",
    "try:\n    int('x')\nexcept ValueError as e:\n    print(type(e).__name__)",
    "class R:\n    def __init__(self):\n        self.code = 1\n        self.types = []\n        self.trace = None\nr = R()\nprint(r.code, r.types, r.trace)",
    "import urllib.error\ntry:\n    pass\nexcept urllib.error.HTTPError as e:\n    print(e.code)",
    "import os, shutil\nos.makedirs('out', exist_ok=True)\nshutil.copy('data.txt', 'out/data.txt')\nfor root, dirs, files in os.walk('.'):\n    print(root, len(files))",
    "import json\r\nprint(json.dumps(1))\r\n",
    "print (1)\nmatch 3:\n    case 1:\n        pass\n    case _:\n        print('other')",
    "if __name__ == '__main__':\n    import sys\n    print(__file__, sys.version)",
];

#[test]
fn evasions_are_refused() {
    let mut passed = Vec::new();
    for src in EVASIONS {
        if let Ok(()) = audit_source(src) {
            passed.push(*src);
        }
    }
    assert!(passed.is_empty(), "these passed the audit: {passed:#?}");
    assert!(EVASIONS.len() >= 25);
}

#[test]
fn ordinary_scripts_pass() {
    for src in ORDINARY {
        if let Err(r) = audit_source(src) {
            panic!("{src:?} was refused: {r}");
        }
    }
}

#[test]
fn huge_sources_are_judged_quickly_and_without_deep_recursion() {
    // A 200k-name attribute chain: refused, not a stack overflow or a quadratic walk.
    let src = format!("x{}\n", ".a".repeat(200_000));
    let started = std::time::Instant::now();
    let r = audit_source(&src).unwrap_err();
    assert!(r.reason.contains("attribute chain"), "{r}");
    let nested = format!("{}1{}\n", "(".repeat(5_000), ")".repeat(5_000));
    let _ = audit_source(&nested);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn refusals_name_the_line_and_what_was_reached() {
    let r = audit_source("x = 1\nimport os as o\n\no.system('x')\n").unwrap_err();
    assert_eq!(r.line, Some(4), "{r}");
    assert!(r.reason.contains("os.system"), "{r}");
    let r = audit_source("import json\nimport subprocess\n").unwrap_err();
    assert_eq!(r.line, Some(2));
    assert!(r.reason.contains("subprocess"), "{r}");
    let r = audit_source("ｅｖａｌ('1')").unwrap_err();
    assert!(r.reason.contains("not ASCII"), "{r}");
}

#[test]
fn files_missing_outside_unparseable_or_shadowed_are_refused() {
    let (dir, ws) = workspace();
    let root = dir.path();
    // Missing.
    let r = audit_file(&ws, "scripts/nope.py").unwrap_err();
    assert!(r.reason.contains("does not exist"), "{r}");
    // Outside the workspace.
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "print(1)\n").unwrap();
    assert!(audit_file(&ws, outside.path().to_str().unwrap()).is_err());
    assert!(audit_file(&ws, "../x.py").is_err());
    // Unparseable.
    std::fs::write(root.join("scripts/bad.py"), "def f(:\n").unwrap();
    let r = audit_file(&ws, "scripts/bad.py").unwrap_err();
    assert!(r.reason.contains("does not parse"), "{r}");
    // A local `json.py` beside the script shadows the standard `json`.
    std::fs::write(root.join("scripts/json.py"), "print('shadow')\n").unwrap();
    std::fs::write(
        root.join("scripts/uses_json.py"),
        "import json\nprint(json.dumps(1))\n",
    )
    .unwrap();
    let r = audit_file(&ws, "scripts/uses_json.py").unwrap_err();
    assert!(r.reason.contains("shadows"), "{r}");
    // A local `os.py` in the workspace root shadows `os` for a script anywhere.
    std::fs::write(root.join("os.py"), "def getcwd(): pass\n").unwrap();
    std::fs::write(
        root.join("scripts/cwd.py"),
        "import os\nprint(os.getcwd())\n",
    )
    .unwrap();
    let r = audit_file(&ws, "scripts/cwd.py").unwrap_err();
    assert!(r.reason.contains("shadows"), "{r}");
    // A local module that shadows nothing is audited as part of the script.
    std::fs::write(root.join("scripts/helper.py"), "def go():\n    eval('1')\n").unwrap();
    std::fs::write(root.join("scripts/main.py"), "import helper\nhelper.go()\n").unwrap();
    let r = audit_file(&ws, "scripts/main.py").unwrap_err();
    assert!(
        r.reason.contains("helper") && r.reason.contains("eval"),
        "{r}"
    );
    std::fs::write(root.join("scripts/helper.py"), "def go():\n    return 1\n").unwrap();
    // A native or compiled module beside the source is loaded instead of it.
    std::fs::write(
        root.join("scripts/helper.cpython-312-x86_64-linux-gnu.so"),
        "",
    )
    .unwrap();
    let r = audit_file(&ws, "scripts/main.py").unwrap_err();
    assert!(r.reason.contains(".so"), "{r}");
    std::fs::remove_file(root.join("scripts/helper.cpython-312-x86_64-linux-gnu.so")).unwrap();
    let ok = audit_file(&ws, "scripts/main.py").unwrap();
    assert_eq!(ok.rel, std::path::Path::new("scripts/main.py"));
    assert_eq!(ok.sha256.len(), 64);
}

#[test]
fn the_shell_policy_audits_python_commands() {
    let (dir, ws) = workspace();
    std::fs::write(
        dir.path().join("good.py"),
        "import json\nprint(json.dumps([1]))\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bad.py"),
        "import os\nos.system('rm -rf ~')\n",
    )
    .unwrap();
    let p = policy(&ws, &[]);
    let cases: &[(&str, Decision)] = &[
        ("python3 -c 'print(1)'", Decision::Ask),
        ("python3 -c 'import os; os.system(\"x\")'", Decision::Deny),
        ("python -u -c 'print(1)'", Decision::Ask),
        ("python -uc 'eval(\"1\")'", Decision::Deny),
        ("python3 good.py --flag x", Decision::Ask),
        ("python3 ./good.py", Decision::Ask),
        ("python3 bad.py", Decision::Deny),
        ("python3 missing.py", Decision::Deny),
        ("python3 ../outside.py", Decision::Deny),
        ("python3", Decision::Deny),
        ("python3 -", Decision::Deny),
        ("python3 -i good.py", Decision::Deny),
        // `-m`: installed modules ask like python; pytest is judged as pytest.
        ("python3 -m http.server", Decision::Ask),
        ("python3 -m pytest", Decision::Ask),
        ("python3 -W ignore good.py", Decision::Deny),
        (
            "python3 --check-hash-based-pycs always good.py",
            Decision::Deny,
        ),
        ("python3 \"$F\"", Decision::Deny),
        ("python3 -c \"$CODE\"", Decision::Deny),
        ("python3 *.py", Decision::Deny),
        ("echo hi | python3", Decision::Deny),
        ("python3 <<'EOF'\nimport os\nEOF", Decision::Deny),
        ("ls && python3 bad.py", Decision::Deny),
        ("env python3 bad.py", Decision::Deny),
        ("timeout 5 python3 bad.py", Decision::Deny),
        ("bash -c 'python3 bad.py'", Decision::Deny),
        ("python3.12 bad.py", Decision::Deny),
        ("/usr/bin/python3 bad.py", Decision::Deny),
        ("python3 --version", Decision::Ask),
        ("python3 ~/good.py", Decision::Deny),
        // The script audited must be the one run, with the interpreter audited.
        ("cd scripts && python3 good.py", Decision::Deny),
        ("env -C scripts python3 good.py", Decision::Deny),
        ("PYTHONHOME=./fake python3 good.py", Decision::Deny),
        ("env PYTHONINSPECT=1 python3 good.py", Decision::Deny),
    ];
    let mut wrong = Vec::new();
    for (line, want) in cases {
        let d = p.decide(line);
        if d.decision != *want {
            wrong.push(format!("{line:?} → {:?}: {}", d.decision, d.reason));
        }
        if *want == Decision::Deny && d.tier != Tier::Rule {
            wrong.push(format!("{line:?} denied at tier {:?}", d.tier));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The refusal names the script, the line and what was reached.
    let d = p.decide("python3 bad.py");
    assert!(
        d.reason.contains("bad.py") && d.reason.contains("line 2"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("os.system"), "{}", d.reason);
    // A pass leaves python on the confirm list.
    let d = p.decide("python3 good.py");
    assert_eq!(d.tier, Tier::Default, "{}", d.reason);
    assert!(d.reason.contains("confirm list"), "{}", d.reason);
}

#[test]
fn no_rule_lifts_an_audit_refusal() {
    let (dir, ws) = workspace();
    std::fs::write(dir.path().join("good.py"), "print(1)\n").unwrap();
    std::fs::write(dir.path().join("bad.py"), "__import__('os')\n").unwrap();
    let p = policy(
        &ws,
        &[
            (Decision::Allow, "run_shell(python3 *)"),
            (Decision::Allow, "run_shell(env *)"),
            (Decision::Allow, "run_shell(cd *)"),
        ],
    );
    // After `cd`, the script audited is the one in the new directory, and its refusal holds
    // under an allow rule.
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    std::fs::write(
        dir.path().join("sub/good.py"),
        "import os\nos.system('x')\n",
    )
    .unwrap();
    let d = p.decide("cd sub && python3 good.py");
    assert_eq!(d.decision, Decision::Deny, "{}", d.reason);
    assert!(
        d.reason.contains("os.system") && d.reason.contains("from `sub`"),
        "{}",
        d.reason
    );
    assert_eq!(p.decide("cd sub").decision, Decision::Allow);
    let d = p.decide("python3 good.py");
    assert_eq!(d.decision, Decision::Allow, "{}", d.reason);
    assert!(d.reason.contains("sha256"), "{}", d.reason);
    for line in [
        "python3 bad.py",
        "env python3 bad.py",
        "python3 -c 'eval(1)'",
    ] {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Deny, "{line}: {}", d.reason);
        assert_eq!(d.tier, Tier::Rule, "{line}");
    }
}

/// Approves, after rewriting the script the call runs (the world changing while a person
/// thinks).
struct RewritingApprover {
    path: std::path::PathBuf,
    content: &'static str,
}

#[async_trait]
impl Approver for RewritingApprover {
    fn name(&self) -> &str {
        "rewriting"
    }

    async fn approve(
        &self,
        _request: &ApprovalRequest<'_>,
    ) -> Result<dsh_core::ApprovalAnswer, ApprovalError> {
        std::fs::write(&self.path, self.content)?;
        Ok(ApprovalOutcome::AllowedOnce.into())
    }
}

fn shell_pipeline(
    ws: &Arc<Workspace>,
    runs: &Arc<AtomicUsize>,
    content: &'static str,
) -> Arc<Pipeline> {
    let mut registry = Registry::new();
    let runs = runs.clone();
    registry
        .register(
            FnTool::new("run_shell", move |_, _| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(ToolOutput::new("ran", json!({"n": 1})))
                }
            })
            // Policies judge what a tool declares, never its name.
            .accesses(|a| {
                vec![dsh_core::Access::Execute {
                    command: a["command"].as_str().unwrap_or_default().to_owned(),
                }]
            }),
        )
        .unwrap();
    Pipeline::builder(registry, Arc::new(MemoryJournal::new("t")))
        .pre_policy(policy(ws, &[]))
        .guard(PythonAuditGuard::new(ws.clone()))
        .approver(Arc::new(RewritingApprover {
            path: ws.root().join("job.py"),
            content,
        }))
        .build()
}

async fn run_line(p: &Pipeline, line: &str) -> Arc<dsh_core::FrozenResult> {
    let call = ToolCall::new("1", "run_shell", json!({"command": line}));
    p.run_batch(vec![call], &CancellationToken::new())
        .await
        .unwrap()
        .results
        .remove(0)
}

#[tokio::test]
async fn a_script_changed_after_the_audit_is_refused_just_before_it_runs() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.root().join("job.py"), "print('hello')\n").unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    // Gate 1 audits the harmless script (python asks); the approver rewrites it, then
    // approves; gate 3 audits again and refuses.
    let p = shell_pipeline(&ws, &runs, "import shutil\nshutil.rmtree('.')\n");
    let r = run_line(&p, "python3 job.py").await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Denied),
        "{}",
        r.content()
    );
    assert_eq!(r.decided_by().gate, Gate::Guard, "{}", r.content());
    assert_eq!(r.decided_by().policy.as_deref(), Some("python-audit"));
    assert!(r.content().contains("shutil.rmtree"), "{}", r.content());
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The same flow with an edit that still passes runs.
    std::fs::write(ws.root().join("job.py"), "print('hello')\n").unwrap();
    let p = shell_pipeline(&ws, &runs, "print('still fine')\n");
    let r = run_line(&p, "python3 job.py").await;
    assert!(r.ok(), "{}", r.content());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn the_guard_judges_only_python() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.root().join("s.py"), "print(1)\n").unwrap();
    let g = PythonAuditGuard::new(ws.clone());
    assert!(g.refusals("python3 s.py").is_empty());
    assert!(g.refusals("ls | grep x").is_empty());
    // Lists and rules are gate 1's business; the guard keeps only the audit's refusals.
    assert!(g.refusals("rm -rf x").is_empty());
    std::fs::write(ws.root().join("s.py"), "import socket\n").unwrap();
    let refusals = g.refusals("ls && python3 s.py");
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].contains("socket"), "{refusals:?}");
}

#[test]
fn every_refusal_says_why() {
    for src in EVASIONS {
        let why = audit_source(src)
            .err()
            .map(|r| r.to_string())
            .unwrap_or_default();
        assert!(why.split_whitespace().count() >= 3, "{src:?} → {why:?}");
    }
}

/// One script and the decision wanted: `None` when it must pass, else words its refusal must
/// contain (what made the decision).
type Case = (&'static str, Option<&'static str>);

/// Audits every case as a script in one real workspace and reports every wrong decision.
fn check_cases(cases: &[Case]) {
    let (dir, ws) = workspace();
    let mut wrong = Vec::new();
    for (i, (src, want)) in cases.iter().enumerate() {
        let name = format!("case_{i}.py");
        std::fs::write(dir.path().join(&name), src).unwrap();
        match (audit_file(&ws, &name), want) {
            (Ok(_), None) => {}
            (Ok(_), Some(w)) => {
                wrong.push(format!("passed, wanted a refusal naming {w:?}: {src:?}"))
            }
            (Err(r), None) => wrong.push(format!("refused ({r}): {src:?}")),
            (Err(r), Some(w)) if !r.reason.contains(w) => {
                wrong.push(format!("refused without naming {w:?} ({r}): {src:?}"));
            }
            (Err(_), Some(_)) => {}
        }
        std::fs::remove_file(dir.path().join(&name)).unwrap();
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

const PATHLIB: &[Case] = &[
    (
        "from pathlib import Path\nPath('x').rename('y')",
        Some("`Path.rename`, which moves a file"),
    ),
    (
        "from pathlib import Path\nPath('x').replace('y')",
        Some("`Path.replace`"),
    ),
    (
        "from pathlib import Path\nPath('x').chmod(0o755)",
        Some("`Path.chmod`"),
    ),
    (
        "from pathlib import Path\nPath('x').lchmod(0o755)",
        Some("`Path.lchmod`"),
    ),
    (
        "from pathlib import Path\nPath('x').symlink_to('/etc')",
        Some("`Path.symlink_to`"),
    ),
    (
        "from pathlib import Path\nPath('x').hardlink_to('y')",
        Some("`Path.hardlink_to`"),
    ),
    (
        "from pathlib import Path\nPath('x').unlink()",
        Some("`.unlink`"),
    ),
    (
        "from pathlib import Path\nPath('d').rmdir()",
        Some("`.rmdir`"),
    ),
    // Paths built from variables and through methods.
    (
        "import sys\nfrom pathlib import Path\nname = sys.argv[1]\np = Path(name)\nq = p.with_suffix('.bak')\np.rename(q)",
        Some("`p.rename(q)` is `Path.rename`"),
    ),
    (
        "from pathlib import Path\n(Path.cwd() / 'a').rename('b')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nd = Path.cwd() / 'a'\nd.replace('b')",
        Some("`Path.replace`"),
    ),
    (
        "import pathlib\nfor f in pathlib.Path('.').glob('*.txt'):\n    f.replace(f.with_suffix('.old'))",
        Some("`Path.replace`"),
    ),
    (
        "from pathlib import Path\nfor f in sorted(Path('.').iterdir()):\n    f.chmod(0o777)",
        Some("`Path.chmod`"),
    ),
    (
        "from pathlib import Path\ndef mv(p: Path, q):\n    p.rename(q)",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nimport typing\ndef mv(p: typing.Optional[Path] = None):\n    p.rename('x')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nPath.home().joinpath('x').rename('y')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nPath(__file__).parent.with_name('x').chmod(0o777)",
        Some("`Path.chmod`"),
    ),
    (
        "from pathlib import Path\nPath('a').resolve().parent.rename('b')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path as P\nP('a').rename('b')",
        Some("`Path.rename`"),
    ),
    (
        "import pathlib as pl\npl.PurePosixPath('a')\npl.PosixPath('a').replace('b')",
        Some("`Path.replace`"),
    ),
    (
        "from pathlib import Path\nPath.rename(Path('a'), 'b')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nwith_it = Path('a')\nmove = with_it.rename",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nclass Job:\n    def __init__(self):\n        self.out = Path('o')\n    def done(self):\n        self.out.rename('final')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\nif (p := Path('a')).exists():\n    p.rename('b')",
        Some("`Path.rename`"),
    ),
    (
        "from pathlib import Path\np = Path('a')\np /= 'b'\np.rename('c')",
        Some("`Path.rename`"),
    ),
    // An object of unknown type in a script that uses pathlib, called with Path's shape.
    (
        "from pathlib import Path\ndef go(x):\n    x.rename('b')",
        Some("may be `Path.rename`"),
    ),
    (
        "from pathlib import Path\ndef go(x):\n    x.chmod(0o600)",
        Some("may be `Path.chmod`"),
    ),
    ("x = make()\nx.symlink_to('y')", Some("`Path.symlink_to`")),
    ("getattr(x, 'symlink_to')", Some("symlink_to")),
    // Ordinary code.
    ("print('abc'.replace('a', 'b'))", None),
    (
        "from pathlib import Path\ns = 'abc'\nprint(s.replace('a', 'b'), Path('x').name)",
        None,
    ),
    (
        "from pathlib import Path\nimport pandas as pd\ndf = pd.DataFrame()\ndf = df.rename(columns={'a': 'b'})\ndf = df.replace({'a': 1})\ndf = df.replace(0, 1)\nprint(Path('x'))",
        None,
    ),
    ("d = {'a': 1}\ne = d.copy()\nprint(e)", None),
    ("class L:\n    link = 'x'\nprint(L().link)", None),
    (
        "from pathlib import Path\nimport dataclasses\n@dataclasses.dataclass\nclass A:\n    x: int = 1\nprint(dataclasses.replace(A(), x=2), Path('.'))",
        None,
    ),
    (
        "from pathlib import Path\nfor p in Path('.').iterdir():\n    print(p.name.replace('_', '-'))",
        None,
    ),
    (
        "from pathlib import Path\nprint(Path('a').read_text().replace('x', 'y'))",
        None,
    ),
    (
        "from pathlib import Path\np = Path('data.txt')\nprint(p.with_suffix('.csv'), p.exists(), p.stat().st_size)",
        None,
    ),
    // Without pathlib, an unknown object's `rename(x)` is not taken for a path (a miss the
    // module docs name).
    ("def go(s):\n    return s.rename('total')", None),
];

#[test]
fn pathlib_moves_links_and_mode_changes_are_refused_on_paths() {
    check_cases(PATHLIB);
    let r = audit_source(
        "from pathlib import Path\nimport sys\n\np = Path(sys.argv[1])\np.rename('x')\n",
    )
    .unwrap_err();
    assert_eq!(r.line, Some(5), "{r}");
}

const OS_FILES: &[Case] = &[
    (
        "import os\nos.symlink('/etc/passwd', 'p')",
        Some("`os.symlink`"),
    ),
    (
        "import os as o\no.link('a', 'b')",
        Some("`o.link` is refused (it is `os.link`)"),
    ),
    ("from os import link", Some("`os.link`")),
    ("from os import symlink as s", Some("`os.symlink`")),
    (
        "import os\nfd = os.open('x', os.O_WRONLY | os.O_CREAT)",
        Some("`os.open` with `O_WRONLY`"),
    ),
    (
        "import os\nos.open('x', os.O_RDONLY | os.O_CREAT)",
        Some("`os.open` with `O_CREAT`"),
    ),
    (
        "import os\nfrom os import O_CREAT\nos.open('x', O_CREAT)",
        Some("`O_CREAT`"),
    ),
    (
        "from os import O_TRUNC, open as osopen\nosopen('x', O_TRUNC)",
        Some("`O_TRUNC`"),
    ),
    ("import os\nos.open('x', os.O_RDWR)", Some("`O_RDWR`")),
    ("import os\nos.open('x', os.O_APPEND)", Some("`O_APPEND`")),
    (
        "import os\nos.open('x', flags=os.O_WRONLY)",
        Some("`O_WRONLY`"),
    ),
    (
        "import os\nos.open('x', 0o101)",
        Some("numeric flags `0o101`"),
    ),
    ("import os\nos.open('x', 577)", Some("numeric flags `577`")),
    (
        "import os\nflags = os.O_RDONLY\nos.open('x', flags)",
        Some("not written at the call"),
    ),
    (
        "import os\nos.open('x', 1 << 6)",
        Some("the flags `1 << 6`"),
    ),
    (
        "import os\nos.open(*args)",
        Some("flags the audit cannot read"),
    ),
    (
        "import os\nos.open('x', os.O_WEIRD)",
        Some("`O_WEIRD`, which the audit does not know"),
    ),
    (
        "import os\nf = os.open",
        Some("`os.open` used other than as a direct call"),
    ),
    // Reading passes.
    (
        "import os\nfd = os.open('data.txt', os.O_RDONLY)\nos.close(fd)",
        None,
    ),
    (
        "import os\nos.open('data.txt', os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)",
        None,
    ),
    ("import os\nos.open('data.txt', 0)", None),
    (
        "from os import O_RDONLY, open as osopen\nosopen('data.txt', O_RDONLY)",
        None,
    ),
    ("import os\nprint(os.path.islink('x'), os.readlink)", None),
];

#[test]
fn os_links_and_writing_os_open_are_refused() {
    check_cases(OS_FILES);
    let r = audit_source("import os\n\nos.open('x',\n  os.O_CREAT)\n").unwrap_err();
    assert_eq!(r.line, Some(3), "{r}");
}

const COPIES: &[Case] = &[
    ("import shutil\nshutil.copy('data.txt', 'out.txt')", None),
    (
        "import shutil\nshutil.copy('data.txt', 'scripts/x.txt')",
        None,
    ),
    (
        "import shutil\nshutil.copy('data.txt', 'scripts/../y.txt')",
        None,
    ),
    (
        "import shutil\nshutil.copy2('data.txt', dst='./z.txt')",
        None,
    ),
    (
        "import shutil\nshutil.copystat('data.txt', 'data2.txt')",
        None,
    ),
    (
        "import shutil\nfrom pathlib import Path\nshutil.copy('data.txt', Path('scripts') / 'a.txt')",
        None,
    ),
    (
        "import os, shutil\nshutil.copy('data.txt', os.path.join('scripts', 'b.txt'))",
        None,
    ),
    (
        "import shutil\nshutil.copytree('scripts', 'scripts_copy')",
        None,
    ),
    (
        "import shutil\nwith open('data.txt') as a, open('c.txt', 'w') as b:\n    shutil.copyfileobj(a, b)",
        None,
    ),
    (
        "import shutil\nshutil.copy2('data.txt', '/etc/x')",
        Some("`shutil.copy2` to `/etc/x`, outside the workspace"),
    ),
    (
        "import shutil\nshutil.copyfile('data.txt', '~/x')",
        Some("`shutil.copyfile` to `~/x`, under `~`"),
    ),
    (
        "import os, shutil\nshutil.copy('data.txt', os.path.expanduser('~/x'))",
        Some("`shutil.copy` to `os.path.expanduser('~/x')`, under `~`"),
    ),
    (
        "import shutil\nfrom pathlib import Path\nshutil.copy('data.txt', Path.home() / 'x')",
        Some("under `~`"),
    ),
    (
        "import shutil, sys\ndst = sys.argv[1]\nshutil.copytree('scripts', dst)",
        Some("`shutil.copytree` to `dst`, which is not a literal path"),
    ),
    (
        "import shutil\nshutil.copy('data.txt', '../x')",
        Some("`shutil.copy` to `../x`, outside the workspace"),
    ),
    (
        "import shutil\nshutil.copymode('data.txt', '/tmp/x')",
        Some("`shutil.copymode` to `/tmp/x`"),
    ),
    (
        "from shutil import copy as c\nc('data.txt', '/tmp/y')",
        Some("`shutil.copy` to `/tmp/y`"),
    ),
    (
        "import shutil\nshutil.copy('data.txt', dst='/tmp/z')",
        Some("`shutil.copy` to `/tmp/z`"),
    ),
    (
        "import shutil\nshutil.copy(*pair)",
        Some("`shutil.copy` with a destination the audit cannot read"),
    ),
    (
        "import shutil\nf = shutil.copy\nf('a', 'b')",
        Some("`shutil.copy` used other than as a direct call"),
    ),
    (
        "import shutil\nlist(map(shutil.copy2, ['a'], ['/tmp/b']))",
        Some("`shutil.copy2` used other than"),
    ),
    (
        "import shutil\nshutil.copy('data.txt', 'scripts/' + name)",
        Some("not a literal path"),
    ),
];

#[test]
fn shutil_copies_must_land_inside_the_workspace() {
    check_cases(COPIES);
    // An absolute destination inside the workspace passes; a symlink out of it does not.
    let (dir, ws) = workspace();
    let root = ws.root().display().to_string();
    std::fs::write(
        dir.path().join("abs.py"),
        format!("import shutil\nshutil.copy('data.txt', '{root}/scripts/c.txt')\n"),
    )
    .unwrap();
    audit_file(&ws, "abs.py").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    std::fs::write(
        dir.path().join("link.py"),
        "import shutil\nshutil.copy('data.txt', 'out/c.txt')\n",
    )
    .unwrap();
    let r = audit_file(&ws, "link.py").unwrap_err();
    assert!(
        r.reason.contains("`out/c.txt`, outside the workspace"),
        "{r}"
    );
    assert_eq!(r.line, Some(2));
    // `python -c` code is judged against the workspace too.
    let r = dsh_policy::python::audit_code(&ws, "import shutil; shutil.copy('a', '/etc/b')")
        .unwrap_err();
    assert!(r.reason.contains("outside the workspace"), "{r}");
    dsh_policy::python::audit_code(&ws, "import shutil; shutil.copy('data.txt', 'd.txt')").unwrap();
}

#[test]
fn copy_destinations_without_a_workspace_are_judged_conservatively() {
    let r = audit_source("import shutil\nshutil.copy('a', '/srv/x')").unwrap_err();
    assert!(
        r.reason.contains("cannot be checked against a workspace"),
        "{r}"
    );
    let r = audit_source("import shutil\nshutil.copy('a', 'x/../../y')").unwrap_err();
    assert!(r.reason.contains("outside the workspace"), "{r}");
    audit_source("import shutil\nshutil.copy('a', 'x/../y')").unwrap();
}

const NETWORK: &[Case] = &[
    (
        "import asyncio\nasyncio.open_connection('h', 80)",
        Some("`asyncio.open_connection`"),
    ),
    (
        "import asyncio\nasyncio.start_server(cb, 'h', 1)",
        Some("`asyncio.start_server`"),
    ),
    (
        "import asyncio\nasyncio.open_unix_connection('/s')",
        Some("`asyncio.open_unix_connection`"),
    ),
    (
        "import asyncio\nasyncio.start_unix_server(cb, '/s')",
        Some("`asyncio.start_unix_server`"),
    ),
    (
        "from asyncio import open_connection",
        Some("`asyncio.open_connection`"),
    ),
    (
        "import asyncio as a\na.streams.open_connection('h', 1)",
        Some("open_connection"),
    ),
    (
        "import asyncio\nloop = asyncio.get_event_loop()\nloop.create_connection(P, 'h', 80)",
        Some("`.create_connection`"),
    ),
    (
        "import asyncio\nasyncio.get_running_loop().create_server(P, 'h', 1)",
        Some("`.create_server`"),
    ),
    (
        "loop.create_datagram_endpoint(P, remote_addr=('h', 1))",
        Some("`.create_datagram_endpoint`"),
    ),
    ("loop.sock_connect(s, ('h', 1))", Some("`.sock_connect`")),
    (
        "loop.create_unix_connection(P, '/s')",
        Some("`.create_unix_connection`"),
    ),
    ("import http.client", Some("`http.client`")),
    ("from http import client", Some("`http.client`")),
    (
        "from http.client import HTTPConnection",
        Some("`http.client`"),
    ),
    ("import urllib.request as r", Some("`urllib.request`")),
    ("from urllib import request", Some("`urllib.request`")),
    (
        "from urllib.request import urlopen",
        Some("`urllib.request`"),
    ),
    (
        "import urllib.parse\nurllib.request.urlopen('http://x')",
        Some("refused module `urllib.request`"),
    ),
    (
        "import http.cookiejar\nimport http\nhttp.client.HTTPConnection('x')",
        Some("refused module `http.client`"),
    ),
    ("import ftplib", Some("`ftplib`")),
    ("import smtplib as s", Some("`smtplib`")),
    ("import telnetlib", Some("`telnetlib`")),
    ("import xmlrpc.client", Some("`xmlrpc.client`")),
    ("from xmlrpc import client", Some("the module `xmlrpc`")),
    ("import ssl", Some("`ssl`")),
    ("import imaplib", Some("`imaplib`")),
    ("import urllib.robotparser", Some("`urllib.robotparser`")),
    ("__import__('ssl')", Some("`__import__`")),
    (
        "from logging.handlers import SocketHandler",
        Some("SocketHandler"),
    ),
    (
        "import logging.handlers\nlogging.handlers.HTTPHandler('h', '/')",
        Some("`.HTTPHandler`"),
    ),
    // Ordinary code.
    (
        "import urllib.parse\nprint(urllib.parse.quote('a b'))",
        None,
    ),
    (
        "from urllib.parse import urlparse\nprint(urlparse('http://x/y').path)",
        None,
    ),
    (
        "import asyncio\nasync def main():\n    await asyncio.sleep(0)\nasyncio.run(main())",
        None,
    ),
    ("import http\nprint(http.HTTPStatus.OK)", None),
    (
        "from logging.handlers import RotatingFileHandler\nprint(RotatingFileHandler)",
        None,
    ),
];

#[test]
fn network_routes_without_socket_are_refused() {
    check_cases(NETWORK);
}

const BUILTINS: &[Case] = &[
    (
        "class Model:\n    def eval(self):\n        return 1\n    def exec(self):\n        return self.eval()\n    @staticmethod\n    def compile(x):\n        return x\nm = Model()\nprint(m.eval(), m.exec(), Model.compile(1))",
        None,
    ),
    ("model = make()\nmodel.eval()\nmodel.train()", None),
    ("import re\nr = re.compile('x')\nprint(r.match('x'))", None),
    ("from re import compile as rc\nprint(rc('x'))", None),
    (
        "from re import compile\ncompile('x')",
        Some("builtin `compile`"),
    ),
    ("obj = make()\nobj.compile()\nobj.exec()", None),
    (
        "class Q:\n    def run(self):\n        return self.exec()\n    def exec(self):\n        return 1",
        None,
    ),
    ("print(f(eval=True, compile=False))", None),
    (
        "eval('1')",
        Some("the builtin `eval` is refused: it runs code built at run time"),
    ),
    ("f = eval", Some("builtin `eval`")),
    ("@exec\ndef f(): pass", Some("builtin `exec`")),
    ("compile('1', 'f', 'eval')", Some("builtin `compile`")),
    ("__import__('os')", Some("builtin `__import__`")),
    ("import builtins\nbuiltins.eval('1')", Some("`builtins`")),
    (
        "def eval(x):\n    return x\neval('1')",
        Some("`def eval` outside a class rebinds the builtin `eval`"),
    ),
    (
        "class A:\n    def run(self):\n        return eval('1')",
        Some("builtin `eval`"),
    ),
    (
        "class A:\n    def run(self):\n        def exec(x):\n            return x\n        return exec",
        Some("`def exec`"),
    ),
    ("import os\nos.execv('/bin/sh', [])", Some("`os.execv`")),
    ("from os import execv as e", Some("`os.execv`")),
    ("import os as o\no.execlp('sh', 'sh')", Some("`os.execlp`")),
    ("getattr(m, 'exec')", Some("`exec`")),
    ("x.__import__('os')", Some("`.__import__`")),
];

#[test]
fn builtins_are_refused_but_methods_named_like_them_pass() {
    check_cases(BUILTINS);
}

const WRITTEN_THEN_LOADED: &[Case] = &[
    (
        "open('helper.py', 'w').write('x = 1')\nimport helper",
        Some("writes `helper.py` with `open` (line 1) and then imports `helper` (line 2)"),
    ),
    (
        "with open('out.txt', 'w') as f:\n    f.write('x')\nimport json\nprint(json.dumps(1))",
        None,
    ),
    (
        "open('evil.pth', 'w').write('import os')",
        Some("a `.pth` file runs code"),
    ),
    (
        "from pathlib import Path\nPath('.venv/x.pth').write_text('')",
        Some("`.pth`"),
    ),
    (
        "from pathlib import Path\nPath('helper.py').write_text('x = 1')\ndef f():\n    import helper",
        Some("imports `helper` (line 4)"),
    ),
    (
        "import json\nimport sys\nopen(sys.argv[1], 'w').write(json.dumps(1))",
        None,
    ),
    (
        "import sys\nopen(sys.argv[1], 'w').write('x')\nimport csv",
        Some(
            "`sys.argv[1]` (a name the audit cannot read) with `open` (line 2) and then imports `csv` (line 3)",
        ),
    ),
    (
        "import json, sys\nwith open(sys.argv[1], 'w') as f:\n    json.dump(1, f)\ndef later():\n    import json\n    return json.dumps(2)",
        None,
    ),
    (
        "import shutil\nshutil.copy('data.txt', 'helper.py')\nimport helper",
        Some("`helper.py` with `shutil.copy`"),
    ),
    (
        "open('json.py', 'w')",
        Some("shadow the standard module `json`"),
    ),
    (
        "open('sitecustomize.py', 'a')",
        Some("`sitecustomize` runs at every later interpreter start"),
    ),
    (
        "import os\nos.makedirs('pkg')\nopen('pkg/__init__.py', 'w').write('')\nimport pkg",
        Some("imports `pkg`"),
    ),
    (
        "import sys\nname = sys.argv[1]\nopen(f'{name}.py', 'w')\nimport helper",
        Some("imports `helper`"),
    ),
    (
        "import sys\nname = sys.argv[1]\nopen(f'{name}.json', 'w')\nimport csv",
        None,
    ),
    (
        "with open('data.txt') as f:\n    print(f.read())\nimport helper_missing",
        None,
    ),
    (
        "try:\n    import helper\nexcept ImportError:\n    open('helper.py', 'w').write('x = 1')\n    import helper",
        Some("imports `helper` (line 5)"),
    ),
    (
        "from pathlib import Path\nout = Path('build') / 'gen.py'\nout.write_text('x = 1')\nfrom build import gen",
        Some(
            "writes `out` (`build/gen.py`) with `.write_text` (line 3) and then imports `build` (line 4)",
        ),
    ),
    (
        "from pathlib import Path\nPath('notes.md').write_text('x')\nimport textwrap",
        None,
    ),
    (
        "import zipfile\nzipfile.ZipFile('a.zip').extractall('.')\nimport foo",
        Some("`zipfile.ZipFile('a.zip').extractall`"),
    ),
    (
        "import unittest, sys\nopen(sys.argv[1], 'w').write('x')\nunittest.TestLoader().discover('.')",
        Some("loads tests by name"),
    ),
    (
        "import sys\nfor i in range(2):\n    import helper\n    open(sys.argv[1], 'w')",
        Some("imports `helper` (line 3)"),
    ),
    (
        "open('mod.py', 'w').write('x = 1')\nprint('written; run it yourself')",
        None,
    ),
    ("open('data2.txt', 'w')\nimport json", None),
    (
        "from pathlib import Path\np = Path('gen')\n(p / 'helper.py').write_text('')\nimport gen.helper",
        Some("imports `gen.helper`"),
    ),
    (
        "import tempfile\nfd, name = tempfile.mkstemp(suffix='.py', dir='.')\nimport later",
        Some("`tempfile.mkstemp`"),
    ),
    (
        "import py_compile\npy_compile.compile('a.py', cfile='helper.pyc')\nimport helper",
        Some("`py_compile.compile`"),
    ),
];

#[test]
fn code_written_then_loaded_is_refused() {
    check_cases(WRITTEN_THEN_LOADED);
}

#[test]
fn a_local_module_that_writes_code_counts_as_a_write() {
    let (dir, ws) = workspace();
    let scripts = dir.path().join("scripts");
    std::fs::write(
        scripts.join("writer.py"),
        "def make():\n    open('gen.py', 'w').write('x = 1')\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("main.py"),
        "import writer\nwriter.make()\nimport gen\n",
    )
    .unwrap();
    let r = audit_file(&ws, "scripts/main.py").unwrap_err();
    assert!(
        r.reason.contains("local module `writer`") && r.reason.contains("imports `gen` (line 3)"),
        "{r}"
    );
    // A local module that imports lazily, after the script wrote the module it imports.
    std::fs::write(
        scripts.join("lazy.py"),
        "def go():\n    import gen\n    return gen.x\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("main2.py"),
        "import lazy\nopen('gen.py', 'w').write('x = 1')\nlazy.go()\n",
    )
    .unwrap();
    let r = audit_file(&ws, "scripts/main2.py").unwrap_err();
    assert!(
        r.reason.contains("`gen` (in the local module `lazy`"),
        "{r}"
    );
    // A local module that only writes data changes nothing.
    std::fs::write(
        scripts.join("saver.py"),
        "def save():\n    open('out.txt', 'w').write('1')\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("main3.py"),
        "import saver\nsaver.save()\nimport json\n",
    )
    .unwrap();
    audit_file(&ws, "scripts/main3.py").unwrap();
}
