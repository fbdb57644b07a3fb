//! `klab why KIND/NAME`: reads a snapshot through the API of any cluster (klab or not) and prints
//! why the object is in its state. Exit code 0: nothing stuck; 1: something stuck or pending;
//! 2: the object or the cluster could not be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use klab_why::{Settings, Target, TimeStyle};

/// Output format of `klab why`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WhyOutput {
    Text,
    Json,
    Yaml,
}

/// Which kubeconfig: `--kubeconfig`, else `$KUBECONFIG` or `~/.kube/config` as kubectl reads
/// them, else the kubeconfig of a `klab up` in `data_dir`.
pub fn kubeconfig_choice(flag: Option<PathBuf>, data_dir: &Path) -> Option<PathBuf> {
    if flag.is_some() {
        return flag;
    }
    let env_set = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
    let local = data_dir.join("kubeconfig");
    (!env_set && local.exists()).then_some(local)
}

async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<(kube::Client, String)> {
    use anyhow::Context as _;
    let cfg = match kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .context("loading the kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config)")?,
    };
    let ns = cfg.default_namespace.clone();
    Ok((kube::Client::try_from(cfg)?, ns))
}

/// Runs `klab why`; every failure is printed here and becomes exit code 2.
pub async fn why(
    target: &str,
    namespace: Option<&str>,
    kubeconfig: Option<&Path>,
    output: WhyOutput,
    controller_flags: &[String],
) -> ExitCode {
    let mut settings = Settings::default();
    for f in controller_flags {
        let Some((name, value)) = f.split_once('=') else {
            eprintln!("error: --controller-flag {f:?}: expected NAME=VALUE");
            return ExitCode::from(2);
        };
        match settings.set_flag(name, value) {
            Ok(true) => {}
            Ok(false) => {
                eprintln!(
                    "error: --controller-flag {name}: not a kube-controller-manager flag the explanations use"
                );
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let (client, default_ns) = match client(kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let target = match Target::parse(target, namespace.unwrap_or(&default_ns)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let snap = match klab_why::fetch::fetch(&client, &target, settings, None).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let e = match klab_why::explain(&snap, &target, TimeStyle::Wall) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("Error from server (NotFound): {e}");
            return ExitCode::from(2);
        }
    };
    let text = match output {
        WhyOutput::Text => {
            let mut t = klab_why::render_text(&e);
            if !snap.settings.known {
                t.push_str(
                    "(kube-controller-manager flags unknown: upstream v1.33 defaults assumed; pass --controller-flag NAME=VALUE)\n",
                );
            }
            t
        }
        WhyOutput::Json => klab_why::render_json(&e) + "\n",
        WhyOutput::Yaml => klab_why::render_yaml(&e),
    };
    print!("{text}");
    ExitCode::from(u8::from(e.stuck))
}
