// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The provider in a real libfabric: the host's Debian libfabric 1.17 (fi_info, libfabric-bin)
//! loads the cdylib this crate builds as `libexanest-fi.so` from `FI_PROVIDER_PATH` and calls
//! its `fi_prov_ini`. The host has no engine, so `fi_getinfo` finds no domain; the guests'
//! tests list one (tests/guest/fabric.sh).

use std::path::PathBuf;
use std::process::Command;

/// The provider as libfabric loads it: this crate's cdylib, built by cargo in a target
/// directory of this test's own (`cargo test` builds the library as an rlib only for its
/// tests), so that it is this source's and never a stale one.
fn cdylib() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cdylib");
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "--offline",
                    "--lib",
                    "-p",
                    "exanest-fi",
                    "--target-dir",
                ])
                .arg(&dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo");
            assert!(status.success(), "building the provider's cdylib failed");
            let so = dir.join("debug/libexanest_fi.so");
            assert!(so.exists(), "{} not built", so.display());
            so
        })
        .clone()
}

fn fi_info(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::new("fi_info")
        .args(args)
        .env("FI_PROVIDER_PATH", dir)
        .env("FI_LOG_LEVEL", "info")
        .output()
        .expect("fi_info (libfabric-bin, scripts/setup-host.sh)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn libfabric_registers_the_provider() {
    let dir = std::env::temp_dir().join(format!("exanest-fi-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(cdylib(), dir.join("libexanest-fi.so")).unwrap();
    let (status, text) = fi_info(&dir, &["-p", "exanest"]);
    std::fs::remove_dir_all(&dir).unwrap();
    // Loaded, its version accepted (fi_version 1.17), and registered under its name.
    assert!(
        text.contains("registering provider: exanest (0.1)"),
        "{text}"
    );
    assert!(!text.contains("fi_prov_ini"), "{text}");
    // No engine on the host: no domain, and fi_info says so.
    assert_ne!(status, 0, "{text}");
    assert!(text.contains("No data available"), "{text}");
}

#[test]
fn a_file_that_is_not_a_provider_is_not_registered() {
    // The same directory with a copy under a name libfabric does not load (not *-fi.so).
    let dir = std::env::temp_dir().join(format!("exanest-fi-noload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(cdylib(), dir.join("libexanest.so")).unwrap();
    let (_, text) = fi_info(&dir, &["-p", "exanest"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!text.contains("registering provider: exanest"), "{text}");
}
