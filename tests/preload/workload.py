# workload.py - a Python workload for the LD_PRELOAD test: dicts, lists, strings,
# sets, json and regular expressions; prints digests that do not depend on the
# allocator.
import hashlib, json, re, random
random.seed(12345)
h = hashlib.sha256()
d = {}
for i in range(300000):
    d["key%d" % i] = [i, str(i) * (i % 7), {"x": i % 13}]
for i in range(0, 300000, 3):
    del d["key%d" % i]
h.update(str(len(d)).encode())
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(1, 12))) for _ in range(200000)]
words.sort()
h.update(" ".join(words[::1000]).encode())
s = set(words)
h.update(str(len(s)).encode())
doc = json.dumps([{"id": i, "tags": words[i:i + 5], "v": i * 0.5} for i in range(20000)])
back = json.loads(doc)
h.update(str(sum(len(x["tags"]) for x in back)).encode())
text = " ".join(words[:50000])
h.update(str(len(re.findall(r"\b[a-c]+\b", text))).encode())
big = [bytearray(random.randint(1, 100000)) for _ in range(300)]
h.update(str(sum(map(len, big))).encode())
del big
print(h.hexdigest())
