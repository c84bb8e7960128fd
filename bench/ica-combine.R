# Combine raw results of several bench/ica.R runs (e.g. three processes with different seeds:
# Rscript bench/ica.R 34 /tmp/ica-1.csv 20101, ... 20102, ... 20103) into the table the
# vignette reads. Rscript bench/ica-combine.R out.csv raw1.csv raw2.csv ...
args <- commandArgs(trailingOnly = TRUE)
all <- do.call(rbind, lapply(args[-1], read.csv))
tab <- aggregate(. ~ N, data = all, FUN = median)
tab$reps <- as.vector(table(all$N))
write.csv(tab, args[1], row.names = FALSE)
print(tab, digits = 3)
for (v in c("B_nce1", "B_nce10", "B_mle", "c_nce1", "c_nce10", "c_mle")) {
  cat(sprintf("slope of log median %s on log N: %.2f\n", v, coef(lm(log(tab[[v]]) ~ log(tab$N)))[[2]]))
}
cat(sprintf("median ratio NCE/MLE over N: B ratio 1 %.2f, ratio 10 %.2f; c ratio 1 %.2f, ratio 10 %.2f\n",
            median(tab$B_nce1 / tab$B_mle), median(tab$B_nce10 / tab$B_mle),
            median(tab$c_nce1 / tab$c_mle), median(tab$c_nce10 / tab$c_mle)))
