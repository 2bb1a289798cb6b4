fn main() {
    println!("ottla");
}
