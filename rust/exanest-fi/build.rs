//! The libfabric bindings: bindgen (the CLI that scripts/setup-host.sh installs, the one the
//! kernel build uses) over the public headers of Debian's libfabric-dev 1.17 (src/fi.h), for the
//! target being built. LIBFABRIC_INCLUDE overrides where the headers are (default /usr/include).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("fi.rs");
    let inc = env::var("LIBFABRIC_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    let target = env::var("TARGET").unwrap();
    // The clang triple: aarch64-unknown-linux-gnu -> aarch64-linux-gnu.
    let triple = target.replace("-unknown-", "-");
    let bindgen = env::var("BINDGEN").unwrap_or_else(|_| {
        let home = env::var("HOME").unwrap_or_default();
        let cargo = PathBuf::from(home).join(".cargo/bin/bindgen");
        if cargo.exists() {
            cargo.to_string_lossy().into_owned()
        } else {
            "bindgen".into()
        }
    });
    let status = Command::new(&bindgen)
        .args(["src/fi.h", "--output"])
        .arg(&out)
        .args([
            "--allowlist-type",
            "fi_.*|fid.*",
            "--allowlist-var",
            "FI_.*",
            "--no-layout-tests",
            "--use-core",
            "--no-doc-comments",
            "--",
        ])
        .arg(format!("--target={triple}"))
        .arg(format!("-I{inc}"))
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run {bindgen} (scripts/setup-host.sh installs it): {e}")
        });
    assert!(
        status.success(),
        "bindgen failed on the libfabric headers in {inc} (libfabric-dev, scripts/setup-host.sh)"
    );
    println!("cargo:rerun-if-changed=src/fi.h");
    println!("cargo:rerun-if-env-changed=LIBFABRIC_INCLUDE");
    println!("cargo:rerun-if-env-changed=BINDGEN");
}
