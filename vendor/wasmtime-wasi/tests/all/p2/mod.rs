mod api;
mod async_;
mod sync;
