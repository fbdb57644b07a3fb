//! Command-line interface: `klab up`, with component flags under their upstream names.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "klab", version, about = "A Kubernetes-API-compatible cluster whose node-failure behaviour matches upstream")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a live cluster served over TLS for kubectl.
    Up(UpArgs),
}

/// Flags of kube-apiserver that klab honours, under their upstream names.
#[derive(Debug, Args, Clone)]
pub struct ApiServerFlags {
    /// Toleration seconds added to pods without a not-ready NoExecute toleration.
    #[arg(long = "default-not-ready-toleration-seconds", default_value_t = 300)]
    pub default_not_ready_toleration_seconds: i64,
    /// Toleration seconds added to pods without an unreachable NoExecute toleration.
    #[arg(long = "default-unreachable-toleration-seconds", default_value_t = 300)]
    pub default_unreachable_toleration_seconds: i64,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the cluster keeps its store, PKI and kubeconfig.
    #[arg(long, default_value = ".klab")]
    pub data_dir: PathBuf,
    /// Address of the TLS API endpoint.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write the kubeconfig (default: <data-dir>/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Run the cluster's time this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    #[command(flatten)]
    pub apiserver: ApiServerFlags,
}

impl ApiServerFlags {
    fn config(&self) -> klab_apiserver::ApiServerConfig {
        let mut c = klab_apiserver::ApiServerConfig::default();
        c.default_toleration_seconds.not_ready_seconds = self.default_not_ready_toleration_seconds;
        c.default_toleration_seconds.unreachable_seconds = self.default_unreachable_toleration_seconds;
        c
    }
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Up(a) => {
            anyhow::ensure!(a.speed > 0.0 && a.speed.is_finite(), "--speed must be a positive number");
            let opts = klab_server::up::UpOptions {
                data_dir: a.data_dir,
                listen: a.listen,
                kubeconfig: a.kubeconfig,
                speed: a.speed,
                apiserver: a.apiserver.config(),
            };
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
            rt.block_on(klab_server::up::run(opts))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
