//! `#[moat_sdk::main]`: an `async fn main` for moat guests.

use proc_macro::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, ReturnType, parse_macro_input};

/// Makes `async fn main()` the guest's entry point.
///
/// `main` may return `()`, `std::process::ExitCode`, or a `Result` of
/// either with `E: Display` (see `moat_sdk::Termination`); an error is
/// printed to stderr and the exit code is 1.
///
/// ```ignore
/// #[moat_sdk::main]
/// async fn main() -> Result<(), moat_sdk::Error> {
///     let stream = moat_sdk::TcpStream::connect("127.0.0.1", 7000).await?;
///     Ok(())
/// }
/// ```
///
/// It exports `wasi:cli/run@0.3.0`, the asynchronous entry point that can
/// await the host's socket calls, and keeps a synchronous `fn main` that
/// only tells a host without it to use `moat run`.
#[proc_macro_attribute]
pub fn main(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[moat_sdk::main] takes no arguments",
        )
        .to_compile_error()
        .into();
    }
    let function = parse_macro_input!(item as ItemFn);
    if function.sig.asyncness.is_none() {
        return syn::Error::new_spanned(
            function.sig.fn_token,
            "#[moat_sdk::main] needs an `async fn`",
        )
        .to_compile_error()
        .into();
    }
    if function.sig.ident != "main" || !function.sig.inputs.is_empty() {
        return syn::Error::new_spanned(
            &function.sig,
            "#[moat_sdk::main] goes on `async fn main()` (no arguments; use std::env::args)",
        )
        .to_compile_error()
        .into();
    }
    let body = &function.block;
    let attrs = &function.attrs;
    let output = match &function.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote_spanned!(ty.span()=> #ty),
    };
    // Checked where the return type is written, so the error points there.
    let output_check = quote_spanned! {output.span()=>
        const _: fn() = || {
            fn returns<T: ::moat_sdk::Termination>() {}
            returns::<#output>();
        };
    };
    quote! {
        #output_check

        fn main() {
            ::moat_sdk::__private::sync_main_unsupported();
        }

        #(#attrs)*
        async fn __moat_main() -> #output #body

        struct __MoatMain;

        impl ::moat_sdk::__private::RunGuest for __MoatMain {
            async fn run() -> ::core::result::Result<(), ()> {
                ::moat_sdk::__private::run_main(__moat_main()).await
            }
        }

        ::moat_sdk::__private::export!(__MoatMain);
    }
    .into()
}
