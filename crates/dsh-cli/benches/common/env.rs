//! A throwaway world for benches that run the real `dsh exec`: a workspace of small Rust
//! files, a state dir (optionally on another file system, e.g. a tmpfs) and a config dir.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_dsh");

pub struct Env {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub home: PathBuf,
    pub cfg: PathBuf,
    /// The state dir is outside `_root`: removed on drop.
    home_elsewhere: bool,
}

impl Env {
    /// `files` modules `src/m{i}.rs` and a config file of `config`; the state dir (journals)
    /// under `state_in` when given, else beside the workspace in the system temp dir.
    pub fn new(files: usize, config: &str, state_in: Option<&Path>) -> Env {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        for i in 0..files {
            std::fs::write(
                ws.join(format!("src/m{i}.rs")),
                format!("pub fn f{i}() -> usize {{\n    {i}\n}}\n"),
            )
            .unwrap();
        }
        let cfg = root.path().join("cfg");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.toml"), config).unwrap();
        let home = match state_in {
            Some(dir) => tempfile::Builder::new()
                .prefix("dsh-bench-home")
                .tempdir_in(dir)
                .unwrap()
                .keep(),
            None => root.path().join("home"),
        };
        Env {
            ws: ws.canonicalize().unwrap(),
            home,
            cfg,
            home_elsewhere: state_in.is_some(),
            _root: root,
        }
    }

    /// `dsh exec` against the scripted server at `url`, in a clean environment.
    pub fn exec(&self, url: &str) -> Command {
        self.exec_with(Path::new(BIN), url)
    }

    /// [`Env::exec`] with another `dsh` binary (a baseline to compare with).
    pub fn exec_with(&self, bin: &Path, url: &str) -> Command {
        let mut cmd = Command::new(bin);
        cmd.arg("--workspace")
            .arg(&self.ws)
            .args(["exec", "--provider", "openai", "--base-url", url])
            .args(["--model", "scripted", "look at every module"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .env("OPENAI_API_KEY", "sk-bench")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// The newest session journal's records.
    pub fn last_journal(&self) -> Vec<Value> {
        let newest = std::fs::read_dir(self.home.join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
            .unwrap();
        dsh_core::journal::read_journal(&newest)
            .unwrap()
            .records
            .into_iter()
            .map(|e| Value::Object(e.json))
            .collect()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.home_elsewhere {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}
