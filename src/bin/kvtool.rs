//! kvtool: the command line for bloomkv.

use std::process::ExitCode;

use bloomkv::filter::FilterParams;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [cmd, rate] if cmd == "filter-params" => match rate.parse::<f64>() {
            Ok(p) => match FilterParams::for_false_positive_rate(p) {
                Ok(params) => {
                    println!(
                        "bits_per_key={} hashes={} predicted_false_positive_rate={}",
                        params.bits_per_key(),
                        params.hashes(),
                        params.predicted_false_positive_rate()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("kvtool: {e}");
                    ExitCode::from(2)
                }
            },
            Err(_) => {
                eprintln!("kvtool: '{rate}' is not a number");
                ExitCode::from(2)
            }
        },
        _ => {
            eprintln!("usage: kvtool filter-params RATE");
            ExitCode::from(2)
        }
    }
}
