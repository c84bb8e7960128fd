#!/usr/bin/env bash
# Install R and the R packages nce needs from Debian's archive (CRAN is not
# reachable on the build machines), and what R CMD check --as-cran uses as on CRAN's machines:
# checkbashisms (devscripts) on the configure scripts, qpdf on the vignettes' PDFs. Does nothing
# when everything is present.
set -euo pipefail

pkgs=(r-base-dev r-cran-mgcv r-cran-testthat r-cran-knitr r-cran-rmarkdown
      r-cran-roxygen2 pandoc r-cran-future r-cran-future.apply r-cran-survival
      r-cran-bridgesampling r-cran-nlme r-cran-matrix r-cran-tmvtnorm r-cran-png
      r-cran-broom r-cran-progressr r-cran-lintr r-cran-glmnet r-cran-pkgdown r-cran-covr
      r-cran-mclust
      libjs-mathjax devscripts qpdf)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ] && command -v R >/dev/null 2>&1; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
R --version | head -1
