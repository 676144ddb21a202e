mod ip_name_lookup;
mod types;
