fn main() {
    std::process::exit(ppn_gate::cli::main());
}
