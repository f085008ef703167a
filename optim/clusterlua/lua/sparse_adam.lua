-- SparseAdam on one float32 row, its moments m = w[dim + j] and
-- v = w[2 * dim + j] after its values. p: b1, 1-b1, b2, 1-b2, eps, the
-- step size and the decay factor, as float32 values. Every operation is
-- rounded to float32, as the Go kernel computes: a double's +, -, *, /
-- and sqrt of float32 values, rounded, is the float32 operation's result.
return function(w, g, p, dim, f)
  local b1, c1, b2, c2, eps, step, decay = p[1], p[2], p[3], p[4], p[5], p[6], p[7]
  for j = 1, dim do
    local x = g[j]
    local m = f(f(b1 * w[dim + j]) + f(c1 * x))
    local v = f(f(b2 * w[2 * dim + j]) + f(f(c2 * x) * x))
    w[dim + j], w[2 * dim + j] = m, v
    w[j] = f(f(w[j] * decay) - f(f(step * m) / f(f(math.sqrt(v)) + eps)))
  end
end
