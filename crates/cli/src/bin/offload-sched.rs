fn main() -> std::process::ExitCode {
    offload_sched_cli::main()
}
