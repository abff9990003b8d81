fn main() -> std::process::ExitCode {
    offload_sched::cli::main()
}
