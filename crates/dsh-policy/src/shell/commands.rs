//! `find`'s grammar, the destructive modes and output files of listed programs, the shells
//! that are not bash, and the wrappers that run another command. The free commands' flag
//! tables are in `readers.rs`.

use dsh_core::quote_capped;

use super::places::Write;
use super::words::Word;

/// `find` primaries that write or delete (and lose the free pass).
pub(crate) const FIND_WRITES: &[&str] = &["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];
/// `find` primaries that run a command, up to `;` or `+`.
pub(crate) const FIND_EXEC: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];
/// `find` primaries taking a value that is a pattern or number.
pub(crate) const FIND_VALUE: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-perm",
    "-links",
    "-inum",
    "-maxdepth",
    "-mindepth",
    "-lname",
    "-ilname",
    "-fstype",
    "-printf",
    "-context",
];
/// `find` primaries taking a file name.
pub(crate) const FIND_FILE: &[&str] =
    &["-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"];
/// `find` primaries and options without a value.
pub(crate) const FIND_BARE: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-empty",
    "-true",
    "-false",
    "-readable",
    "-writable",
    "-executable",
    "-depth",
    "-follow",
    "-xdev",
    "-mount",
    "-noleaf",
    "-nouser",
    "-nogroup",
    "-daystart",
    "-not",
    "-a",
    "-and",
    "-o",
    "-or",
    "(",
    ")",
    "!",
    ",",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
];

/// A command that runs another one.
pub(crate) enum Wrapped<'a> {
    /// Not a wrapper (or a wrapper given nothing to run: judge it by name).
    No,
    /// Runs `payload`; `note` when the payload can never be free (e.g. `xargs`), with the
    /// assignments the wrapper makes (`env X=1 …`: name, value, as written).
    Runs {
        payload: &'a [Word],
        ask_note: Option<&'static str>,
        assigns: Vec<(String, Word, String)>,
    },
    /// Refused outright.
    Deny(String),
    /// Cannot be judged: at least ask.
    Ask(String),
    /// `bash -c STR`: STR is parsed as a line of its own.
    Shell(&'a Word),
}

/// Recognises wrappers by name and finds their payload.
pub(crate) fn unwrap(words: &[Word]) -> Wrapped<'_> {
    let Some(name) = words.first().and_then(Word::literal) else {
        return Wrapped::No;
    };
    let args = &words[1..];
    let lit = |i: usize| args.get(i).and_then(Word::literal);
    match name {
        "sudo" | "su" | "doas" | "pkexec" | "run0" => {
            Wrapped::Deny(format!("`{name}` runs a command as another user"))
        }
        "bash" if lit(0) == Some("-c") => match args.get(1) {
            Some(s) => Wrapped::Shell(s),
            None => Wrapped::No,
        },
        "env" => {
            let mut i = 0;
            let mut assigns = Vec::new();
            while let Some(a) = lit(i) {
                match a {
                    "-0" | "--null" => i += 1,
                    "-i" | "--ignore-environment" | "-" => {
                        return Wrapped::Deny(format!(
                            "{quoted} clears the environment, dropping the settings dsh gives every command (GIT_CONFIG_*: safe.bareRepository=explicit, core.fsmonitor=false)",
                            quoted = quote_capped(&format!("env {a}"))
                        ));
                    }
                    "-u" | "--unset" => {
                        if let Some(why) = lit(i + 1).and_then(super::assign::unset_refusal) {
                            return Wrapped::Deny(why);
                        }
                        i += 2;
                    }
                    "-S" | "--split-string" | "-C" | "--chdir" => {
                        return Wrapped::Ask(format!(
                            "{quoted} changes what runs in ways the policy does not follow",
                            quoted = quote_capped(&format!("env {a}"))
                        ));
                    }
                    _ if a.starts_with("--unset=") => {
                        if let Some(why) = super::assign::unset_refusal(&a["--unset=".len()..]) {
                            return Wrapped::Deny(why);
                        }
                        i += 1;
                    }
                    _ if a.starts_with('-') => {
                        return Wrapped::Ask(format!(
                            "{quoted} is an option the policy does not know",
                            quoted = quote_capped(&format!("env {a}"))
                        ));
                    }
                    _ if a.contains('=') => {
                        let (name, value) = a.split_once('=').unwrap_or_default();
                        let value = match &args[i] {
                            Word::Lit { glob: false, .. } => Word::lit(value),
                            other => Word::Dyn(other.text().to_owned()),
                        };
                        assigns.push((name.to_owned(), value, a.to_owned()));
                        i += 1;
                    }
                    _ => break,
                }
            }
            if let Some(w) = args.get(i).filter(|w| w.literal().is_none()) {
                return Wrapped::Ask(format!(
                    "`env` is given {} computed at run time",
                    quote_capped(w.text())
                ));
            }
            match payload(args, i, None) {
                Wrapped::Runs {
                    payload, ask_note, ..
                } => Wrapped::Runs {
                    payload,
                    ask_note,
                    assigns,
                },
                other => other,
            }
        }
        "timeout" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-s" | "-k" | "--signal" | "--kill-after" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            // The duration.
            payload(args, i + 1, None)
        }
        "nice" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-n" | "--adjustment" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            payload(args, i, None)
        }
        // `command -v NAME` / `-V` only looks NAME up: judged by name (a free data command).
        "command" if matches!(lit(0), Some("-v" | "-V")) => Wrapped::No,
        "nohup" | "time" | "command" | "exec" | "setsid" | "stdbuf" | "ionice" => {
            // Each wrapper's options, by what they take; an option the policy does not know
            // asks (it may take a value that would be read as the program, or write a file:
            // `time -o FILE`).
            let (flags, valued): (&[&str], &[&str]) = match name {
                "time" => (
                    &["-p", "-v", "-q", "--portability", "--verbose", "--quiet"],
                    &["-f", "--format"],
                ),
                "command" => (&["-p"], &[]),
                "exec" => (&["-l"], &["-a"]),
                "setsid" => (&["-c", "-f", "-w", "--ctty", "--fork", "--wait"], &[]),
                "stdbuf" => (&[], &["-i", "-o", "-e", "--input", "--output", "--error"]),
                "ionice" => (
                    &["-t", "--ignore"],
                    &["-c", "-n", "-p", "--class", "--classdata"],
                ),
                _ => (&[], &[]),
            };
            let mut i = 0;
            while let Some(a) = lit(i) {
                if name == "exec" && a == "-c" {
                    return Wrapped::Deny(
                        "`exec -c` clears the environment, dropping the settings dsh gives every command (GIT_CONFIG_*: safe.bareRepository=explicit, core.fsmonitor=false)".to_owned(),
                    );
                }
                if a == "--" {
                    i += 1;
                    break;
                }
                if !a.starts_with('-') || a == "-" {
                    break;
                }
                let (flag, attached) = match a.split_once('=') {
                    Some((f, _)) if f.starts_with("--") => (f, true),
                    _ => (a, false),
                };
                if flags.contains(&flag) {
                    i += 1;
                } else if valued.contains(&flag) {
                    i += if attached { 1 } else { 2 };
                } else if valued
                    .iter()
                    .any(|v| v.len() == 2 && a.len() > 2 && a.starts_with(*v))
                {
                    // `-oL`: the value attached to a short option.
                    i += 1;
                } else {
                    return Wrapped::Ask(format!(
                        "{quoted} is an option the policy does not know (it may take a value, or write a file)",
                        quoted = quote_capped(&format!("{name} {a}"))
                    ));
                }
            }
            payload(args, i, None)
        }
        "xargs" => {
            // xargs's own options, by what they take; one the policy does not know asks (it
            // may take a value that would be read as the program).
            const FLAGS: &[&str] = &[
                "-0",
                "--null",
                "-r",
                "--no-run-if-empty",
                "-t",
                "--verbose",
                "-p",
                "--interactive",
                "-x",
                "--exit",
                "-o",
                "--open-tty",
            ];
            const VALUED: &[&str] = &[
                "-n",
                "-I",
                "-P",
                "-L",
                "-d",
                "-a",
                "-E",
                "-s",
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ];
            // Their value only attached (`--max-lines=2`): alone, the next word is the program.
            const OPTIONAL: &[&str] = &["--max-lines", "--replace", "--eof"];
            let mut i = 0;
            while let Some(a) = lit(i) {
                if !a.starts_with('-') {
                    break;
                }
                if a == "--" {
                    i += 1;
                    break;
                }
                let flag = a.split_once('=').map_or(a, |(f, _)| f);
                if FLAGS.contains(&a) || OPTIONAL.contains(&flag) {
                    i += 1;
                } else if VALUED.contains(&a) {
                    i += 2;
                } else if flag.starts_with("--") && VALUED.contains(&flag)
                    || (!a.starts_with("--") && a.len() > 2 && VALUED.contains(&&a[..2]))
                {
                    // `--max-args=2`, `-n2`: the value attached.
                    i += 1;
                } else {
                    return Wrapped::Ask(format!(
                        "{quoted} is an option the policy does not know (it may take a value)",
                        quoted = quote_capped(&format!("xargs {a}"))
                    ));
                }
            }
            if i >= args.len() {
                // `xargs` alone runs `echo` with its input.
                return Wrapped::Ask("`xargs` runs a command with arguments from its input".into());
            }
            payload(
                args,
                i,
                Some("xargs adds arguments from its input, which the policy cannot see"),
            )
        }
        _ => Wrapped::No,
    }
}

fn payload<'a>(args: &'a [Word], at: usize, ask_note: Option<&'static str>) -> Wrapped<'a> {
    match args.get(at..) {
        Some(p) if !p.is_empty() => Wrapped::Runs {
            payload: p,
            ask_note,
            assigns: Vec::new(),
        },
        _ => Wrapped::No,
    }
}

/// Programs that always ask, whatever the mode: they reach other machines, containers or
/// virtual machines, credentials and their agents, the system's services, or another user
/// or namespace (`auto` never lifts them, even on the confirm list or none). The hardened
/// sandbox bounds what runs in the workspace; these exist to act outside it, so a person
/// sees each one.
const ALWAYS_ASK: &[&str] = &[
    // Containers, their images and runtimes, and virtual machines.
    "docker",
    "docker-compose",
    "podman",
    "podman-compose",
    "nerdctl",
    "buildah",
    "skopeo",
    "crictl",
    "ctr",
    "runc",
    "crun",
    "lxc",
    "incus",
    "machinectl",
    "systemd-nspawn",
    "virsh",
    "vagrant",
    "multipass",
    "limactl",
    "colima",
    "distrobox",
    "toolbox",
    "apptainer",
    "singularity",
    // Clusters.
    "kubectl",
    "helm",
    "oc",
    "eksctl",
    "minikube",
    "kind",
    "k3d",
    "k9s",
    "kubectx",
    "kubens",
    "argocd",
    "istioctl",
    // Clouds, hosting and deployment.
    "gcloud",
    "gsutil",
    "aws",
    "az",
    "doctl",
    "hcloud",
    "flyctl",
    "heroku",
    "vercel",
    "netlify",
    "wrangler",
    "firebase",
    "railway",
    "terraform",
    "tofu",
    "terragrunt",
    "pulumi",
    "nomad",
    "rclone",
    // Code forges.
    "gh",
    "glab",
    "hub",
    // Other machines.
    "ssh",
    "scp",
    "sftp",
    "rsync",
    "sshpass",
    "sshfs",
    "mosh",
    "autossh",
    "ssh-copy-id",
    "ansible",
    "ansible-playbook",
    "ansible-pull",
    "salt",
    "salt-ssh",
    "pdsh",
    "curl",
    "wget",
    // Credentials and their agents.
    "ssh-add",
    "ssh-agent",
    "gpg",
    "gpg2",
    "gpg-agent",
    "gpgconf",
    "gpg-connect-agent",
    "ansible-vault",
    "vault",
    "op",
    "bw",
    "pass",
    "gopass",
    "secret-tool",
    "keyctl",
    "aws-vault",
    "sops",
    "kinit",
    // The system's services, mounts and schedules.
    "systemd-run",
    "systemctl",
    "service",
    "loginctl",
    "busctl",
    "dbus-send",
    "gdbus",
    "mount",
    "umount",
    "crontab",
    "at",
    // Another user, namespace or root directory.
    "sudo",
    "su",
    "doas",
    "pkexec",
    "run0",
    "runuser",
    "sg",
    "newgrp",
    "nsenter",
    "unshare",
    "chroot",
    "setpriv",
    "capsh",
    "bwrap",
    "firejail",
];

/// Whether `name` (or the program a path to it names) is one of [`ALWAYS_ASK`].
pub(crate) fn always_asks(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    ALWAYS_ASK.contains(&base)
}

/// Programs whose job is the network: with commands' network off they cannot work.
pub(crate) fn network_client(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    matches!(
        base,
        "curl" | "wget" | "nc" | "ncat" | "netcat" | "telnet" | "ftp" | "socat" | "aria2c"
    )
}

/// Why `name` is refused as a shell other than bash: the parser speaks bash, so unwrapping
/// another shell's `-c` would judge a different program than the one that runs.
pub(crate) fn other_shell(name: &str) -> Option<String> {
    let base = name.rsplit('/').next().unwrap_or(name);
    matches!(
        base,
        "sh" | "dash" | "ash" | "zsh" | "ksh" | "mksh" | "pdksh" | "oksh" | "yash" | "posh"
            | "fish" | "csh" | "tcsh" | "busybox" | "toybox" | "elvish" | "nu" | "xonsh"
            | "rc" | "es"
    )
    .then(|| {
        format!(
            "{base} is a shell whose grammar is not bash's, so what it would run cannot be judged; use `bash -c`",
            base = quote_capped(base)
        )
    })
}

/// A destructive mode of a safe- or confirm-list program, which makes it act as a program
/// the lists do not hold: why, naming the flag.
pub(crate) fn acts_as_unlisted(name: &str, args: &[Word]) -> Option<String> {
    let flags = || args.iter().filter_map(Word::literal);
    match name {
        "find" => flags().find(|a| *a == "-delete").map(|_| {
            "`-delete` makes `find` delete files, as `rm` would; `rm` is not on the lists"
                .to_owned()
        }),
        "date" => flags()
            .take_while(|a| *a != "--")
            .find(|a| {
                *a == "--set"
                    || a.starts_with("--set=")
                    || (a.starts_with('-') && !a.starts_with("--") && short_flag(a, 's', "dfrI"))
            })
            .map(|f| {
                format!(
                    "{f} makes `date` set the system clock; a clock setter is not on the lists",
                    f = quote_capped(f)
                )
            }),
        _ => None,
    }
}

/// Whether the short-flag cluster `arg` (`-us`) holds `flag` before any flag taking a value.
fn short_flag(arg: &str, flag: char, value_flags: &str) -> bool {
    for c in arg.chars().skip(1) {
        if c == flag {
            return true;
        }
        if value_flags.contains(c) {
            return false;
        }
    }
    false
}

/// The files a listed program writes through its own flags (`find -fprint F`, `tree -o F`,
/// `sort -o F`, `git … --output=F`, `git format-patch -o DIR`, `git archive -o F`,
/// `pytest --junitxml=F`, `tee F`): each is judged like a redirection to it.
pub(crate) fn output_files(name: &str, args: &[Word]) -> Vec<Write> {
    let mut out = Vec::new();
    let mut push = |target: Word, how: String| out.push(Write { target, how });
    let at = |i: usize| args.get(i);
    let git_sub = if name == "git" {
        super::doors::git_subcommand(args)
    } else {
        None
    };
    let mut i = 0;
    while let Some(w) = at(i) {
        i += 1;
        // A word known only at run time still shows its flag: `--output=$X`.
        let a = w
            .literal()
            .unwrap_or_else(|| w.text().trim_start_matches(['"', '\'']));
        let (flag, attached) = match a.split_once('=') {
            Some((f, _)) if f.starts_with("--") => (f, true),
            _ => (a, false),
        };
        let takes: bool = match name {
            "find" => matches!(flag, "-fprint" | "-fprint0" | "-fprintf" | "-fls"),
            "tree" => flag == "-o" || flag == "--output",
            "sort" => flag == "-o" || flag == "--output",
            "pytest" => matches!(
                flag,
                "--junitxml" | "--junit-xml" | "--resultlog" | "--result-log" | "--basetemp"
            ),
            "git" => {
                flag == "--output"
                    || flag == "--output-directory"
                    || (flag == "-o"
                        && matches!(git_sub.map(|(s, _)| s), Some("format-patch" | "archive")))
            }
            "tee" => !a.starts_with('-'),
            _ => false,
        };
        if !takes {
            continue;
        }
        if name == "tee" {
            push(w.clone(), format!("tee {a}"));
            continue;
        }
        if attached {
            // The value after `=` as a word of its own.
            let value = a.split_once('=').map(|(_, v)| v).unwrap_or_default();
            let target = match w {
                Word::Lit { glob, .. } => Word::Lit {
                    text: value.to_owned(),
                    glob: *glob,
                },
                Word::Dyn(t) => Word::Dyn(t.clone()),
            };
            push(target, format!("{name} {a}"));
        } else if let Some(target) = at(i) {
            push(target.clone(), format!("{name} {a} {}", target.text()));
            i += 1;
        }
    }
    out
}
