mod api;

fn main() {}
