//! Every command over every kind of thing that can sit where it expects a file: a FIFO, a
//! socket, a character device, a directory, a dangling link, a link to itself, a link to
//! `/dev/zero` and a sparse file of 2^40 bytes, at each file a command reads — `pg_control`,
//! the relation mapper, `pg_class`, a table's heap and index, `postgresql.conf`, a `--config`
//! file, a data set's manifest. Each run ends within [`WITHIN`] (a FIFO opened the plain way
//! waits for a writer forever; `/dev/zero` never ends; a 1 TB file takes long to read) with
//! an error naming the file and what it is, never exit 0 and never a signal. Relation files
//! are read through the I/O engine, so those cases run under every io_method; the small
//! files are read by one function whatever the method.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a refused run may take.
const WITHIN: Duration = Duration::from_secs(5);

/// What to put at a path, and the words a message about it may use for it.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Fifo,
    Socket,
    CharDevice,
    Directory,
    DanglingLink,
    LoopingLink,
    LinkToDevZero,
    Sparse1T,
}

const KINDS: [Kind; 8] = [
    Kind::Fifo,
    Kind::Socket,
    Kind::CharDevice,
    Kind::Directory,
    Kind::DanglingLink,
    Kind::LoopingLink,
    Kind::LinkToDevZero,
    Kind::Sparse1T,
];

impl Kind {
    /// Replaces whatever is at `path` with this kind of thing. The socket's listener is
    /// returned to keep it bound.
    fn make(self, path: &Path) -> Option<std::os::unix::net::UnixListener> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).unwrap(),
            Ok(_) => std::fs::remove_file(path).unwrap(),
            Err(_) => {}
        }
        let c_path = || std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        match self {
            Kind::Fifo => {
                let c = c_path();
                // SAFETY: c is a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
            Kind::Socket => return Some(std::os::unix::net::UnixListener::bind(path).unwrap()),
            Kind::CharDevice => {
                let c = c_path();
                // SAFETY: c is a valid NUL-terminated path; (1, 3) is /dev/null's number.
                let made =
                    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
                assert_eq!(
                    made,
                    0,
                    "mknod {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                );
            }
            Kind::Directory => std::fs::create_dir(path).unwrap(),
            Kind::DanglingLink => {
                std::os::unix::fs::symlink(path.with_extension("nowhere"), path).unwrap()
            }
            Kind::LoopingLink => std::os::unix::fs::symlink(path, path).unwrap(),
            Kind::LinkToDevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
            Kind::Sparse1T => std::fs::File::create(path)
                .unwrap()
                .set_len(1 << 40)
                .unwrap(),
        }
        None
    }

    /// Words of which a message about this kind must hold one. A link is named as a link by
    /// readers that do not follow one (the cluster's own files), and by what it leads to by
    /// those that do (relation files, configuration files).
    fn words(self) -> &'static [&'static str] {
        match self {
            Kind::Fifo => &["a FIFO"],
            Kind::Socket => &["a socket"],
            Kind::CharDevice => &["a character device"],
            Kind::Directory => &["a directory"],
            Kind::DanglingLink => &[
                "a symbolic link",
                "No such file or directory",
                "does not exist",
            ],
            Kind::LoopingLink => &[
                "a symbolic link",
                "a loop of symbolic links",
                "Too many levels of symbolic links",
            ],
            // `--heap`/`--index` refuse a link leading out of the data directory first.
            Kind::LinkToDevZero => &[
                "a symbolic link",
                "a character device",
                "outside the data directory",
            ],
            Kind::Sparse1T => &["1099511627776 bytes"],
        }
    }
}

/// A copy of the fixture cluster and a generated data set, made once per target.
struct Scene {
    _tmp: tempfile::TempDir,
    pgdata: PathBuf,
    datasets: PathBuf,
    config: PathBuf,
}

fn scene() -> Scene {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let datasets = tmp.path().join("datasets");
    let out = common::pageio(&[
        "gen",
        "--dataset",
        "uniform",
        "--rows",
        "2000",
        "--out",
        datasets.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = tmp.path().join("pageio.conf");
    std::fs::write(&config, "effective_io_concurrency = 16\n").unwrap();
    Scene {
        _tmp: tmp,
        pgdata,
        datasets,
        config,
    }
}

/// One command line over a scene; `{D}` is the data directory, `{S}` the data sets'
/// directory, `{C}` the config file.
type Command = &'static [&'static str];

/// A file that commands read, and the commands that read it.
struct Target {
    /// The file, with the same placeholders as the commands.
    file: &'static str,
    /// Whether the engine reads it (then every io_method is tried).
    through_the_engine: bool,
    commands: &'static [Command],
}

const TARGETS: &[Target] = &[
    Target {
        file: "{D}/global/pg_control",
        through_the_engine: false,
        commands: &[
            &["verify", "{D}"],
            &["checksums", "--check", "-D", "{D}"],
            &[
                "scan", "--pgdata", "{D}", "--table", "uniform", "--select", "count(*)",
            ],
            &["tables", "--pgdata", "{D}"],
        ],
    },
    Target {
        file: "{D}/global/pg_filenode.map",
        through_the_engine: false,
        commands: &[
            &["tables", "--pgdata", "{D}"],
            &[
                "scan", "--pgdata", "{D}", "--table", "uniform", "--select", "count(*)",
            ],
        ],
    },
    Target {
        file: "{D}/base/5/1259",
        through_the_engine: true,
        commands: &[
            &["tables", "--pgdata", "{D}"],
            &[
                "scan", "--pgdata", "{D}", "--table", "uniform", "--select", "count(*)",
            ],
        ],
    },
    Target {
        file: "{D}/{uniform}",
        through_the_engine: true,
        commands: &[
            &[
                "scan", "--pgdata", "{D}", "--table", "uniform", "--select", "count(*)", "--kind",
                "seq",
            ],
            &[
                "scan",
                "--pgdata",
                "{D}",
                "--table",
                "uniform",
                "--select",
                "count(*)",
                "--kind",
                "bitmap",
                "--where",
                "a between 1 and 2",
            ],
            &[
                "scan",
                "--pgdata",
                "{D}",
                "--table",
                "uniform",
                "--select",
                "count(*)",
                "--kind",
                "index",
                "--where",
                "a between 1 and 2",
            ],
            &["scan", "--pgdata", "{D}", "--heap", "{uniform}"],
            &["verify", "{D}"],
            &["checksums", "--check", "-D", "{D}"],
        ],
    },
    Target {
        file: "{D}/{uniform_a}",
        through_the_engine: true,
        commands: &[
            &[
                "scan",
                "--pgdata",
                "{D}",
                "--table",
                "uniform",
                "--select",
                "count(*)",
                "--kind",
                "index",
                "--where",
                "a between 1 and 2",
            ],
            &[
                "scan",
                "--pgdata",
                "{D}",
                "--heap",
                "{uniform}",
                "--index",
                "{uniform_a}",
                "--kind",
                "bitmap",
                "--where",
                "a between 1 and 2",
            ],
        ],
    },
    Target {
        file: "{S}/uniform/manifest.json",
        through_the_engine: false,
        commands: &[&["scan", "--dataset", "uniform", "--data-dir", "{S}"]],
    },
    Target {
        file: "{S}/uniform/16384",
        through_the_engine: true,
        commands: &[
            &["scan", "--dataset", "uniform", "--data-dir", "{S}"],
            &[
                "scan",
                "--dataset",
                "uniform",
                "--data-dir",
                "{S}",
                "--kind",
                "bitmap",
                "--where",
                "a between 1 and 2",
            ],
        ],
    },
    Target {
        file: "{C}",
        through_the_engine: false,
        commands: &[
            &["advise", "--config", "{C}"],
            &[
                "scan",
                "--dataset",
                "uniform",
                "--data-dir",
                "{S}",
                "--config",
                "{C}",
            ],
            &["verify", "{D}", "--config", "{C}"],
        ],
    },
];

fn fill(arg: &str, scene: &Scene) -> String {
    let facts = common::fixture_facts();
    arg.replace("{D}", scene.pgdata.to_str().unwrap())
        .replace("{S}", scene.datasets.to_str().unwrap())
        .replace("{C}", scene.config.to_str().unwrap())
        .replace("{uniform_a}", facts.path("uniform_a"))
        .replace("{uniform}", facts.path("uniform"))
}

#[test]
fn every_command_names_what_sits_at_a_path_and_never_waits_on_it() {
    let root = common::is_root();
    let mut runs = 0;
    let mut failures = Vec::new();
    for target in TARGETS {
        let scene = scene();
        let file = PathBuf::from(fill(target.file, &scene));
        let file_name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let original = std::fs::read(&file).unwrap();
        for kind in KINDS {
            if matches!(kind, Kind::CharDevice) && !root {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "mknod needs root; CI is set"
                );
                eprintln!("SKIP character devices: mknod needs root");
                continue;
            }
            let _listener = kind.make(&file);
            let methods: &[&str] = if target.through_the_engine {
                &["sync", "worker", "io_uring"]
            } else {
                &["worker"]
            };
            for command in target.commands {
                for method in methods {
                    let mut args: Vec<String> = command.iter().map(|a| fill(a, &scene)).collect();
                    if target.through_the_engine && args[0] != "tables" {
                        args.extend(["--io-method".to_string(), method.to_string()]);
                    }
                    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                    let start = Instant::now();
                    let out = common::pageio_bounded(&argv, 60);
                    let took = start.elapsed();
                    runs += 1;
                    let all = format!(
                        "{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let named = all.contains(&file_name);
                    let said = kind.words().iter().any(|w| all.contains(w));
                    let code = out.status.code();
                    // pg_checksums walks a directory wherever one is, and so does verify:
                    // an empty one in a relation file's place holds nothing to check.
                    let walked = matches!(kind, Kind::Directory)
                        && target.through_the_engine
                        && matches!(args[0].as_str(), "verify" | "checksums");
                    if walked {
                        if code != Some(0) || took > WITHIN {
                            failures.push(format!(
                                "{kind:?} at {}: {argv:?}: exit {:?} after {took:?}",
                                target.file, out.status
                            ));
                        }
                        continue;
                    }
                    if !matches!(code, Some(1 | 2)) || took > WITHIN || !named || !said {
                        failures.push(format!(
                            "{kind:?} at {}: {argv:?}: exit {:?} after {took:?}, names the file: {named}, says {:?}: {said}\n{}",
                            target.file,
                            out.status,
                            kind.words(),
                            all.lines().take(6).collect::<Vec<_>>().join("\n")
                        ));
                    }
                }
            }
        }
        // Put it back: a later target's commands read it.
        let _ = std::fs::remove_dir_all(&file);
        let _ = std::fs::remove_file(&file);
        std::fs::write(&file, original).unwrap();
    }
    assert!(runs > 200, "{runs} runs");
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
