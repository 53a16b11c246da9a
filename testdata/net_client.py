# net_client.py URL [CAFILE]: GET URL through the proxy that the environment
# names (HTTP_PROXY / HTTPS_PROXY), once with urllib.request and once with
# http.client, and print one JSON object:
#   {"urllib": {"status": 200, "body": "..."}, "http.client": {"error": "OSError: ..."}}
# CAFILE, if given, is the CA bundle to trust for https:// URLs.
import http.client, json, os, ssl, sys, urllib.error, urllib.parse, urllib.request

url = sys.argv[1]
ctx = ssl.create_default_context(cafile=sys.argv[2] if len(sys.argv) > 2 else None)
u = urllib.parse.urlsplit(url)


def result(status, body):
    return {"status": status, "body": body.decode("utf-8", "replace")}


def failure(e):
    return {"error": f"{type(e).__name__}: {e}"}


def with_urllib():
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
    try:
        with opener.open(url, timeout=10) as r:
            return result(r.status, r.read())
    except urllib.error.HTTPError as e:  # a 403 from the proxy lands here
        return result(e.code, e.read())
    except Exception as e:
        return failure(e)


def with_http_client():
    try:
        proxy = os.environ.get(u.scheme + "_proxy") or os.environ.get(u.scheme.upper() + "_PROXY")
        if not proxy:
            raise RuntimeError(f"no {u.scheme}_proxy in the environment")
        p = urllib.parse.urlsplit(proxy)
        if u.scheme == "https":
            c = http.client.HTTPSConnection(p.hostname, p.port, timeout=10, context=ctx)
            c.set_tunnel(u.hostname, u.port or 443)  # CONNECT
            c.request("GET", (u.path or "/") + ("?" + u.query if u.query else ""))
        else:
            c = http.client.HTTPConnection(p.hostname, p.port, timeout=10)
            c.request("GET", url)  # absolute-form, as a proxy expects
        r = c.getresponse()
        return result(r.status, r.read())
    except Exception as e:
        return failure(e)


print(json.dumps({"urllib": with_urllib(), "http.client": with_http_client()}))
