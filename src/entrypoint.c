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

// The vector is not returned: a value that R's try-catch machinery holds survives the next young
// collection (it is referenced from that machinery's older objects) and would stay counted.
static SEXP alloc_doubles(void *len) {
  (void) allocVector(REALSXP, *(R_xlen_t *) len);
  return R_NilValue;
}

static SEXP alloc_failed(SEXP cond, void *dummy) {
  (void) dummy;
  return cond;
}

struct reserve {
  R_xlen_t len;
  int ok;
};

static void reserve_fn(void *data) {
  struct reserve *r = (struct reserve *) data;
  r->ok = R_tryCatchError(alloc_doubles, &r->len, alloc_failed, NULL) == R_NilValue;
}

// Asks R for `n` doubles and drops them at once: if R's vector heap cannot hold them, R runs one
// full collection and grows the heap to fit (it grows only after a full collection, by a fifth
// at a time otherwise). The vector is never written, so no page of it is touched. 1 when the
// allocation succeeded; R's error (no memory) is caught, silently, and R_ToplevelExec keeps any
// other jump (an interrupt) from crossing the Rust frames that called this.
// -1 when something jumped out of it: R_tryCatchError evaluates R code, where a pending
// interrupt fires and R_ToplevelExec stops it; the caller raises it again (it was lost).
int nce_reserve_heap(double n) {
  struct reserve r = {(R_xlen_t) n, 0};
  if (!R_ToplevelExec(reserve_fn, &r)) return -1;
  return r.ok;
}

void R_init_nce(void *dll) {
  register_extendr_panic_hook();
  R_init_nce_extendr(dll);
}
