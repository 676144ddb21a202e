//! The cold-start guest: prints one line.

#[moat_sdk::main]
async fn main() {
    println!("hello from a moat guest");
}
