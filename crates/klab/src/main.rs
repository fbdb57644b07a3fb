//! The `klab` binary: parse the command line, call one library entry point, map errors to exit codes.

fn main() {
    println!("klab");
}
