-- add_job.lua: add an action/stats/zookeeper job to the jobs stream once per incoming message.
--
-- KEYS[1] the job marker of the message (utils/frontier/keys.py job_marker), KEYS[2] the jobs stream
-- ARGV[1] marker TTL (s), ARGV[2] stream max length (approximate trim), then field/value pairs.
-- Returns the stream entry id, or false when this message already became a job (a replay).

if redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[1])) == false then
  return false
end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
