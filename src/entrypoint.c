// Registration of the Rust routines, extendr's panic hook, and a safe interrupt check.
#include <Rinternals.h>
#include <R_ext/Rdynload.h>
#include <R_ext/Utils.h>

void R_init_nce_extendr(void *dll);
void register_extendr_panic_hook(void);

static void check_interrupt_fn(void *dummy) {
  (void) dummy;
  R_CheckUserInterrupt();
}

// 1 when the user asked to interrupt. R_ToplevelExec keeps R's longjmp from crossing Rust frames.
int nce_interrupt_pending(void) {
  return R_ToplevelExec(check_interrupt_fn, NULL) == FALSE;
}

void R_init_nce(void *dll) {
  register_extendr_panic_hook();
  R_init_nce_extendr(dll);
}
