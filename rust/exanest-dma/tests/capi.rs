// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The C API as a C program uses it: installs the host build of the library the way
//! `make install-lib` does (header, static library, pkg-config file), builds `tests/capi.c`
//! with `pkg-config --static` and the C compiler, and runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// This crate's static library, built by cargo for the host in a target directory of its own
/// (`cargo test` builds only the rlib, and the outer cargo holds its target directory).
fn static_lib() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-target");
    run(Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--offline",
            "--lib",
            "-p",
            "exanest-dma",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target));
    target.join("debug/libexanest_dma.a")
}

#[test]
fn c_api_reports_errors_and_clears_out_parameters() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sys = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-sysroot");
    let _ = std::fs::remove_dir_all(&sys);
    std::fs::create_dir_all(sys.join("include/linux")).unwrap();
    std::fs::create_dir_all(sys.join("lib/pkgconfig")).unwrap();
    std::fs::copy(
        top.join("include/exanest_dma.h"),
        sys.join("include/exanest_dma.h"),
    )
    .unwrap();
    std::fs::copy(
        top.join("include/uapi/linux/exanest_dma.h"),
        sys.join("include/linux/exanest_dma.h"),
    )
    .unwrap();
    std::fs::copy(static_lib(), sys.join("lib/libexanest_dma.a")).unwrap();
    let pc = std::fs::read_to_string(top.join("rust/exanest-dma/exanest-dma.pc.in")).unwrap();
    std::fs::write(
        sys.join("lib/pkgconfig/exanest-dma.pc"),
        pc.replace("@PREFIX@", sys.to_str().unwrap()),
    )
    .unwrap();

    let flags = run(Command::new("pkg-config")
        .args(["--static", "--cflags", "--libs", "exanest-dma"])
        .env("PKG_CONFIG_PATH", sys.join("lib/pkgconfig")));
    let exe = sys.join("capi");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut build = Command::new(cc);
    build
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(top.join("rust/exanest-dma/tests/capi.c"))
        .args(flags.split_whitespace());
    run(&mut build);
    let out = run(&mut Command::new(&exe));
    print!("{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        58,
        "{out}"
    );
}
