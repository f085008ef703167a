-- RowWiseAdagrad on one float32 row, its sum w[dim + 1] after its
-- values: computed in double, as the Go kernel computes, each stored
-- value rounded to float32. p: lr, eps, weight decay.
return function(w, g, p, dim, f)
  local lr, eps, wd = p[1], p[2], p[3]
  local sq = 0.0
  for j = 1, dim do
    local x = g[j] + wd * w[j]
    sq = sq + x * x
  end
  local s = f(w[dim + 1] + sq / dim)
  local step = lr / (math.sqrt(s) + eps)
  for j = 1, dim do
    local x = g[j] + wd * w[j]
    w[j] = w[j] - step * x
  end
  w[dim + 1] = s
end
