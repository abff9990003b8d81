//! `offload-bench`: the offload benchmark and CUDA correctness check
//! (`offload_sched::bench::run`).
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "offload-bench",
    about = "saxpy-regions benchmark: sync policies vs hand-written, PyTorch, libomptarget"
)]
struct Cli {
    #[command(flatten)]
    args: offload_sched::bench::BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    match offload_sched::bench::run(&cli.args) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("offload-bench: {e}");
            std::process::exit(1);
        }
    }
}
