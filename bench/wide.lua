-- sysbench script for bench/capture.py's "wide" workload: small transactions on a 40-column
-- table (created and filled by bench/capture_workloads.py). Per transaction: one UPDATE of six
-- columns, one DELETE and one INSERT of a whole row (the deleted id, so the table keeps its size).

sysbench.cmdline.options = {
  table_size = {"Rows in the wide table", 10000},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
end

function thread_done()
  con:disconnect()
end

local function row(i)
  local n = {}
  for k = 0, 7 do n[#n + 1] = tostring(i * 7 + k + sysbench.rand.uniform(0, 9)) end
  for k = 0, 3 do n[#n + 1] = tostring(i * 1000003 + k) end
  for k = 0, 3 do n[#n + 1] = string.format("%d.%d5", i % 100000, k) end
  for k = 0, 2 do n[#n + 1] = string.format("%.6f", i / 7 + k) end
  for k = 0, 2 do n[#n + 1] = string.format("'2024-0%d-1%d 10:11:12.%06d'", k + 1, k, i % 1000000) end
  n[#n + 1] = "'2024-05-06'"
  n[#n + 1] = "'12:34:56'"
  n[#n + 1] = "NOW(3)"
  for k = 0, 7 do n[#n + 1] = string.format("'value-%d-%08d-%s'", k, i, sysbench.rand.string("##########")) end
  n[#n + 1] = string.format("'c%015d'", i)
  n[#n + 1] = string.format("'text of row %d with some words in it'", i)
  n[#n + 1] = ({"'new'", "'paid'", "'sent'", "'done'"})[i % 4 + 1]
  n[#n + 1] = tostring(i % 2)
  n[#n + 1] = tostring(i % 30000)
  return string.format("(%d, %s)", i, table.concat(n, ", "))
end

function event()
  local size = sysbench.opt.table_size
  local a = sysbench.rand.uniform(1, size)
  local b = sysbench.rand.uniform(1, size)
  con:query("BEGIN")
  con:query(string.format("UPDATE wide SET i1 = i1 + 1, d1 = d1 + 1.5, f1 = f1 * 1.01, t1 = NOW(6), " ..
                          "v1 = '%s', en = 'paid' WHERE id = %d", sysbench.rand.string("v1-###-@@@@@@"), a))
  con:query(string.format("DELETE FROM wide WHERE id = %d", b))
  con:query("INSERT INTO wide VALUES " .. row(b))
  con:query("COMMIT")
end
