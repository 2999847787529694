//! The Linux helper: confines the current process (see the parent module's docs for the
//! order and the reasons). Runs in the child of `dsh sandbox-exec` (see `supervise`),
//! single-threaded, right before `execve`.

use std::collections::BTreeMap;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    PathBeneath, PathFd, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::{Enforcement, ExecSpec, LandlockLevel, Probe};

/// The newest ABI whose rights the ruleset asks for; `required` needs all of them.
const TARGET_ABI: u32 = 6;

/// Rights Landlock handles (denies unless a rule grants them) in the workspace-write profile:
/// every write-like right up to ABI 5 — write, truncate, create, remove, rename/link
/// (`Refer`), device `ioctl`. Reading and executing are not handled, so they stay allowed
/// everywhere.
fn handled_fs() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V5)
}

/// What the read-only profile handles: the write rights and reading, listing and executing.
fn handled_fs_read_only() -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI::V5)
}

/// What a readable tree or file grants in the read-only profile.
fn granted_readable() -> BitFlags<AccessFs> {
    AccessFs::from_read(ABI::V5)
}

/// The rights of `rights` that apply to a path that is not a directory (Landlock refuses a
/// rule giving directory rights to a file).
fn for_file(rights: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    rights & AccessFs::from_file(ABI::V5)
}

/// Devices the read-only profile lets a command read: what shells and ordinary tools open.
const READABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/urandom"];

/// What the writable trees grant: everything handled except creating device nodes, which a
/// root caller could otherwise use to reach a raw disk through a node inside the workspace.
fn granted_in_trees() -> BitFlags<AccessFs> {
    handled_fs() & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// What `/dev/null` grants (a file: only file rights apply).
fn granted_on_dev_null() -> BitFlags<AccessFs> {
    AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
}

/// Applies everything but the final `execve`. On `Err`, the caller reports and exits.
pub(super) fn confine(spec: &ExecSpec) -> Result<(), String> {
    // Mounts first: they need the capability the next steps drop, and Landlock forbids
    // changing the mount topology once it is enforced.
    // The hardened profile's mounts; the read-only profile's too when it hides files.
    if spec.hardened || !spec.hide.is_empty() {
        super::protect::hardened_mounts(&super::protect::Mounts {
            writable: &spec.writable,
            read_only: &spec.protect,
            hidden: &spec.hide,
        })?;
    }
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    drop_capabilities(spec.read_only || spec.hardened)?;
    cloexec_inherited();
    if spec.landlock != LandlockLevel::Off {
        let status = landlock(spec)?;
        if spec.landlock == LandlockLevel::Required
            && status.ruleset != RulesetStatus::FullyEnforced
        {
            return Err(format!(
                "Landlock is not fully enforced on this kernel ({}); refusing to run \
                 (--sandbox required)",
                describe(&status).1
            ));
        }
    }
    let sockets = if spec.read_only {
        Sockets::None
    } else if spec.hardened {
        Sockets::NoneButMetadata
    } else if spec.allow_network {
        Sockets::Any
    } else {
        Sockets::Unix
    };
    let filter = seccomp_filter(sockets)?;
    seccompiler::apply_filter(&filter).map_err(|e| format!("installing the seccomp filter: {e}"))
}

/// Applies the read-only profile's ruleset (best effort, nothing readable or writable: the
/// probe execs nothing) to this process and reports what is enforced: the helper's
/// `--probe`. Since that ruleset handles every right of the workspace-write one, a full
/// enforcement of it covers both profiles.
pub(super) fn probe_self() -> Probe {
    // Whether the hardened profile's mount namespace can be made (this process exits next).
    let mounts = super::protect::hardened_mounts(&super::protect::Mounts {
        writable: &[],
        read_only: &[],
        hidden: &[],
    });
    let spec = ExecSpec {
        landlock: LandlockLevel::BestEffort,
        read_only: true,
        hardened: false,
        readable: Vec::new(),
        protect: Vec::new(),
        hide: Vec::new(),
        writable: Vec::new(),
        allow_network: false,
        confine: true,
        lifeline: false,
        status_fd: None,
        stdin_fd: None,
        program: Vec::new(),
    };
    match landlock(&spec) {
        Ok(status) => {
            let (abi, detail) = describe(&status);
            let landlock = match status.ruleset {
                RulesetStatus::FullyEnforced => Enforcement::Full,
                RulesetStatus::PartiallyEnforced => Enforcement::Partial,
                RulesetStatus::NotEnforced => Enforcement::None,
            };
            Probe {
                landlock,
                abi,
                mounts,
                detail,
            }
        }
        Err(e) => Probe {
            landlock: Enforcement::None,
            abi: 0,
            mounts,
            detail: e,
        },
    }
}

/// The ABI in effect and a sentence on what is (not) enforced.
fn describe(status: &RestrictionStatus) -> (u32, String) {
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
        LandlockStatus::NotEnabled => {
            return (
                0,
                "Landlock is built into this kernel but not enabled (add `landlock` to the \
                 `lsm=` boot parameter)"
                    .to_owned(),
            );
        }
        LandlockStatus::NotImplemented => {
            return (
                0,
                "this kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK), \
                 or a container blocks its system calls"
                    .to_owned(),
            );
        }
    };
    let missing: Vec<&str> = [
        (3, "truncating files outside the writable trees (ABI 3)"),
        (4, "TCP rules (ABI 4; the seccomp socket ban still holds)"),
        (5, "device ioctl rules (ABI 5)"),
        (
            6,
            "signal and abstract-socket scoping (ABI 6): commands can signal dsh and other \
             processes of this user",
        ),
    ]
    .into_iter()
    .filter(|(needed, _)| abi < *needed)
    .map(|(_, what)| what)
    .collect();
    let detail = if missing.is_empty() {
        format!("Landlock ABI {abi}: reads, writes, TCP and signals confined")
    } else {
        format!("Landlock ABI {abi} lacks: {}", missing.join("; "))
    };
    debug_assert!(missing.is_empty() == (abi >= TARGET_ABI));
    (abi, detail)
}

fn landlock(spec: &ExecSpec) -> Result<RestrictionStatus, String> {
    fn err(what: &'static str) -> impl Fn(landlock::RulesetError) -> String {
        move |e| format!("Landlock ({what}): {e}")
    }
    let level = match spec.landlock {
        LandlockLevel::Required => CompatLevel::HardRequirement,
        LandlockLevel::BestEffort | LandlockLevel::Off => CompatLevel::BestEffort,
    };
    let confined_reads = spec.read_only || spec.hardened;
    let handled = if confined_reads {
        handled_fs_read_only()
    } else {
        handled_fs()
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(handled)
        .map_err(err("file-system rights"))?;
    if !spec.allow_network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(err("TCP rights"))?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(ABI::V6))
        .map_err(err("scoping"))?
        .create()
        .map_err(err("creating the ruleset"))?;
    let in_trees = if confined_reads {
        granted_in_trees() | granted_readable()
    } else {
        granted_in_trees()
    };
    for dir in &spec.writable {
        let fd = PathFd::new(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        created = created
            .add_rule(PathBeneath::new(fd, in_trees))
            .map_err(err("writable tree"))?;
    }
    let mut null_rights = granted_on_dev_null();
    if confined_reads {
        null_rights |= AccessFs::ReadFile;
        // What may be read: a path that does not exist (any more) is skipped; a file gets
        // the file rights only.
        let devices = READABLE_DEVICES[1..].iter().map(std::path::Path::new);
        for path in spec.readable.iter().map(|p| p.as_path()).chain(devices) {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let rights = if meta.is_dir() {
                granted_readable()
            } else {
                for_file(granted_readable())
            };
            let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(err("readable path"))?;
        }
        // This process's own /proc entry, resolved now: the shell reads /dev/fd and
        // /proc/self through it; the processes it starts get none.
        if let Ok(fd) = PathFd::new("/proc/self") {
            created = created
                .add_rule(PathBeneath::new(fd, granted_readable()))
                .map_err(err("/proc/self"))?;
        }
    }
    let null = PathFd::new(READABLE_DEVICES[0]).map_err(|e| format!("/dev/null: {e}"))?;
    created = created
        .add_rule(PathBeneath::new(null, null_rights))
        .map_err(err("/dev/null"))?;
    created.restrict_self().map_err(err("enforcing"))
}

/// Keeps a root caller's file-ownership capabilities (so root inside the writable trees
/// still owns its files) and drops every other one; the read-only and hardened profiles
/// keep none. With
/// `no_new_privs` set, `execve` cannot give them back. For an ordinary user this changes
/// nothing: the sets are already empty.
fn drop_capabilities(keep_none: bool) -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets, capabilities, set_capabilities};
    let keep = if keep_none {
        CapabilitySet::empty()
    } else {
        CapabilitySet::CHOWN
            | CapabilitySet::DAC_OVERRIDE
            | CapabilitySet::DAC_READ_SEARCH
            | CapabilitySet::FOWNER
            | CapabilitySet::FSETID
    };
    let now = capabilities(None).map_err(|e| format!("capget: {e}"))?;
    set_capabilities(
        None,
        CapabilitySets {
            effective: now.effective & keep,
            permitted: now.permitted & keep,
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("capset: {e}"))
}

/// Marks every inherited descriptor above 2 close-on-exec: a writable descriptor inherited
/// from dsh's own parent would let the command write where Landlock forbids opening.
/// Best effort: kernels before 5.11 lack `close_range` and keep what dsh inherited.
#[allow(unsafe_code)]
fn cloexec_inherited() {
    // SAFETY: with CLOSE_RANGE_CLOEXEC, close_range closes nothing now; it only sets
    // FD_CLOEXEC, so no descriptor owned by Rust code becomes invalid before the execve that
    // follows. The arguments are plain integers.
    let _ = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
}

/// System calls denied (`EPERM`) whatever the call asked for.
const ALWAYS_DENIED: &[libc::c_long] = &[
    // io_uring can open sockets and files without the system calls filtered here.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Nothing leaves the session dsh kills when the command ends, nor the process group it
    // kills at once (a chain that `setpgid`s and forks would outrun the sweeps of /proc).
    libc::SYS_setsid,
    libc::SYS_setpgid,
    // Reaching into other processes (Landlock confines this too, when present).
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // Kernel attack surface with no place in a build or test run.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    // The mount family (Landlock also forbids changing the mount topology).
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    // The kernel keyring may hold credentials.
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// What the read-only profile also refuses: changing a file's mode, owner, times or extended
/// attributes — Landlock (up to ABI 6) does not confine them, and a file the user owns
/// anywhere (`~/.ssh/id_rsa`) would otherwise be changed by a command that runs free.
const METADATA_WRITES: &[libc::c_long] = &[
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fchmodat2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// The system calls that set a file's mode, and the index of their mode argument: the
/// hardened profile refuses set-user-ID and set-group-ID bits in it (a root-owned setuid
/// program left in the workspace would serve any local user). `openat2` passes its mode in
/// a struct the filter cannot read, so that profile refuses it (programs fall back to
/// `openat`).
const MODE_SETTERS: &[(libc::c_long, u8)] = &[
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_mknodat, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_fchmodat2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
];

fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "no seccomp filter for the {} architecture; use --sandbox off",
            std::env::consts::ARCH
        )
    })
}

/// Which sockets a command may open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sockets {
    /// Any family (the network was lifted for this command).
    Any,
    /// `AF_UNIX` only (the workspace-write profile).
    Unix,
    /// No `socket(2)` at all, UNIX ones included; `socketpair(AF_UNIX)` still works (the
    /// read-only profile: a pathname socket could reach a daemon outside the sandbox).
    None,
    /// As `None`, but a file's mode and times may change (builds `chmod +x` what they make;
    /// outside the writable trees every mount is read-only), except that no set-user-ID or
    /// set-group-ID bit may be set: the hardened workspace-write profile.
    NoneButMetadata,
}

/// The seccomp program (see the parent module's docs for what it denies).
// `c_long` is `i64` on the 64-bit targets seccompiler supports; `i64::from` keeps it so.
#[allow(clippy::useless_conversion)]
pub(super) fn seccomp_filter(sockets: Sockets) -> Result<BpfProgram, String> {
    let arg = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| format!("seccomp rule: {e}"))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = ALWAYS_DENIED
        .iter()
        .map(|&nr| (i64::from(nr), Vec::new()))
        .collect();
    // The kernel reads the request as a 32-bit `unsigned int`: a Dword comparison catches
    // requests with high bits set too.
    rules.insert(
        i64::from(libc::SYS_ioctl),
        vec![
            arg(1, SeccompCmpOp::Eq, u64::from(libc::TIOCSTI as u32))?,
            arg(1, SeccompCmpOp::Eq, u64::from(libc::TIOCLINUX as u32))?,
        ],
    );
    let unix = u64::from(libc::AF_UNIX as u32);
    match sockets {
        Sockets::Any => {}
        Sockets::Unix => {
            for nr in [libc::SYS_socket, libc::SYS_socketpair] {
                rules.insert(i64::from(nr), vec![arg(0, SeccompCmpOp::Ne, unix)?]);
            }
        }
        Sockets::None | Sockets::NoneButMetadata => {
            // An empty rule list matches every call of that number.
            rules.insert(i64::from(libc::SYS_socket), Vec::new());
            if sockets == Sockets::None {
                for &nr in METADATA_WRITES {
                    rules.insert(i64::from(nr), Vec::new());
                }
            } else {
                rules.insert(i64::from(libc::SYS_openat2), Vec::new());
                for &(nr, mode) in MODE_SETTERS {
                    let bit = |b: u32| {
                        SeccompCondition::new(
                            mode,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::MaskedEq(u64::from(b)),
                            u64::from(b),
                        )
                        .and_then(|c| SeccompRule::new(vec![c]))
                        .map_err(|e| format!("seccomp rule: {e}"))
                    };
                    rules.insert(
                        i64::from(nr),
                        vec![bit(libc::S_ISUID)?, bit(libc::S_ISGID)?],
                    );
                }
            }
            rules.insert(
                i64::from(libc::SYS_socketpair),
                vec![arg(0, SeccompCmpOp::Ne, unix)?],
            );
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target_arch()?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    let mut program: BpfProgram = filter
        .try_into()
        .map_err(|e| format!("seccomp filter: {e}"))?;
    deny_x32(&mut program)?;
    Ok(program)
}

/// On x86-64, x32-ABI system calls carry the architecture of x86-64 but numbers with bit 30
/// set, which the per-number rules would not match: deny them all, right after the
/// architecture check (the program's first three instructions).
#[cfg(target_arch = "x86_64")]
fn deny_x32(program: &mut BpfProgram) -> Result<(), String> {
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let shape_ok = program.len() > 3
        && program[0].code == LD_W_ABS
        && program[0].k == 4
        && program[2].code == RET_K;
    if !shape_ok {
        return Err("seccomp filter: unexpected program shape".to_owned());
    }
    let f = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let guard = [
        f(LD_W_ABS, 0, 0, 0),
        f(JGE_K, 0, 1, X32_SYSCALL_BIT),
        f(RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
    ];
    program.splice(3..3, guard);
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn deny_x32(_: &mut BpfProgram) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seccomp_program_builds_with_and_without_the_network() {
        let banned = seccomp_filter(Sockets::Unix).unwrap();
        let open = seccomp_filter(Sockets::Any).unwrap();
        assert!(seccomp_filter(Sockets::None).is_ok());
        assert!(
            banned.len() > open.len(),
            "the socket rules add instructions"
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            banned[4].k, 0x4000_0000,
            "the x32 guard follows the arch check"
        );
    }

    #[test]
    fn trees_never_grant_device_nodes() {
        assert!(!granted_in_trees().contains(AccessFs::MakeBlock));
        assert!(!granted_in_trees().contains(AccessFs::MakeChar));
        assert!(granted_in_trees().contains(AccessFs::Truncate));
        assert!(!handled_fs().contains(AccessFs::ReadFile));
        assert!(!handled_fs().contains(AccessFs::Execute));
        assert!(handled_fs_read_only().contains(AccessFs::ReadFile | AccessFs::ReadDir));
        assert!(!granted_readable().contains(AccessFs::WriteFile));
        assert_eq!(
            for_file(granted_readable()),
            AccessFs::ReadFile | AccessFs::Execute
        );
    }
}
