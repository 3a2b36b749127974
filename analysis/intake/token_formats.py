"""Credential formats as their vendors document them: a fixed prefix, then the documented alphabet and length.

One `(kind, pattern)` per format, the kind naming the vendor in the placeholder (`[REDACTED:stripe_key]`).
Patterns are Python regular expressions compiled with `re.ASCII`; `analysis.intake.redact_rules` puts
`START` in front of each, so `_AKIA…` and `key:ghp_…` are found while `xAKIA…` is not. The labelled
corpus (`evals/redaction_corpus.py`) names the documentation page of every format, with a sample of each.
"""

from __future__ import annotations

START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"
_B62 = "A-Za-z0-9"
_URLSAFE = "A-Za-z0-9_-"
# Password hashes: a `$` as written, doubled or escaped; crypt(3)'s base 64 and standard base 64, a `/` perhaps
# escaped; a salt; where each alphabet's run ends (a stop or a `/` after a hash of fixed length stays out).
_D = r"(?:\$\$?|\\\$)"
_CRYPT = r"(?:[.A-Za-z0-9]|\\?/)"
_BASE64 = r"(?:[A-Za-z0-9+=]|\\?/)"
_SALT = rf"(?:rounds=[0-9]{{1,9}}{_D})?{_CRYPT}{{1,16}}"
_CRYPT_END = r"(?![A-Za-z0-9])"
_BASE64_END = r"(?![A-Za-z0-9+=/])"

TOKEN_FORMATS: tuple[tuple[str, str], ...] = (
    # AWS IAM "Unique identifiers": the four-letter prefix names the resource; keys are 20 characters.
    ("aws_access_key", rf"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{{16}}{_END}"),
    # GitHub "About authentication: token formats" (ghp_, gho_, ghu_, ghs_, ghr_, fine-grained github_pat_).
    ("github_token", rf"(?:gh[pousr]_[{_B62}]{{36,255}}|github_pat_[A-Za-z0-9_]{{22,255}})"),
    # GitLab "Token overview: token prefixes".
    ("gitlab_token", rf"(?:(?:glpat|gldt|glrt|glrtr|glcbt|glptt|glft|glimt|glagent|gloas|glsoat|glffct|glwt)-"
                     rf"[{_URLSAFE}]{{20,255}}|GR1348941[{_URLSAFE}]{{20,255}})"),
    # Slack "Token types" (xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe-, app-level xapp-) and webhook URLs.
    ("slack_token", r"(?:xox[abposre](?:\.[A-Za-z0-9]+)?-[A-Za-z0-9-]{10,250}|xapp-[0-9]-[A-Za-z0-9-]{10,250}"
                    r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,250})"),
    # Google Cloud "API keys", OAuth 2.0 client secrets, access and refresh tokens.
    ("google_api_key", rf"AIza[{_URLSAFE}]{{35}}{_END}"),
    ("google_oauth", rf"(?:GOCSPX-[{_URLSAFE}]{{28}}|ya29\.[{_URLSAFE}]{{20,2048}}|1//0[{_URLSAFE}]{{30,512}})"),
    # Stripe "API keys": secret, restricted and publishable keys, webhook signing secrets.
    ("stripe_key", rf"(?:(?:sk|rk|pk)_(?:live|test)_[{_B62}]{{10,247}}|whsec_[{_B62}]{{32,128}})"),
    # Anthropic console keys (sk-ant-api03-…, sk-ant-admin01-…), before OpenAI's wider sk- rule.
    ("anthropic_key", rf"sk-ant-[a-z]{{2,8}}[0-9]{{2}}-[{_URLSAFE}]{{20,255}}"),
    # OpenAI "API keys": project (sk-proj-), service account (sk-svcacct-), admin, and legacy sk- keys.
    ("openai_key", rf"sk-(?:proj-|svcacct-|admin-|None-)?[{_URLSAFE}]{{20,255}}"),
    ("npm_token", rf"npm_[{_B62}]{{36}}{_END}"),
    ("pypi_token", rf"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[{_URLSAFE}]{{50,512}}"),
    ("sendgrid_key", rf"SG\.[{_URLSAFE}]{{22}}\.[{_URLSAFE}]{{43}}"),
    ("twilio_key", rf"SK[0-9a-fA-F]{{32}}{_END}"),
    ("mailgun_key", r"(?:key-[0-9a-f]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})(?![A-Za-z0-9])"),
    ("mailchimp_key", r"[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"),
    ("huggingface_token", rf"(?:hf_[{_B62}]{{34,64}}|api_org_[{_B62}]{{34}}){_END}"),
    ("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])"),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![A-Za-z0-9])"),
    # Atlassian API tokens (ATATT3…), Bitbucket app passwords (ATBB…).
    ("atlassian_token", r"(?:ATATT3[A-Za-z0-9_=-]{100,512}|ATCTT3[A-Za-z0-9_=-]{100,512}|ATBB[A-Za-z0-9]{28,64})"),
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-[0-9])?(?![A-Za-z0-9])"),
    ("heroku_key", rf"HRKU-[{_URLSAFE}]{{20,128}}"),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}(?![A-Za-z0-9])"),
    ("doppler_token", rf"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{{1,32}}\.)?[{_B62}]{{40,44}}{_END}"),
    ("linear_key", rf"lin_(?:api|oauth)_[{_B62}]{{40}}{_END}"),
    ("grafana_token", r"(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    ("vault_token", rf"hv[sbr]\.[{_URLSAFE}]{{24,512}}"),
    ("terraform_token", rf"[{_B62}]{{14}}\.atlasv1\.[A-Za-z0-9_=-]{{60,128}}"),
    ("pulumi_token", r"pul-[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_]{30,512}"),
    ("newrelic_key", rf"NR(?:AK|II|JS|AA|SP)-[{_URLSAFE}]{{19,40}}{_END}"),
    ("discord_token", rf"(?:[MNO][{_URLSAFE}]{{23,25}}\.[{_URLSAFE}]{{6}}\.[{_URLSAFE}]{{27,38}}"
                      rf"|discord(?:app)?\.com/api/webhooks/[0-9]{{17,20}}/[{_URLSAFE}]{{60,68}})"),
    # Microsoft Teams incoming webhook URLs (Office 365 connectors): the path after the host is the secret.
    ("teams_webhook", r"(?:webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)/[0-9a-fA-F-]{36}"
                      r"@[0-9a-fA-F-]{36}/IncomingWebhook/[0-9a-fA-F]{32}/[0-9a-fA-F-]{36}"),
    # 1Password service account tokens (base64 JSON after `ops_`), Render API keys.
    ("onepassword_token", r"ops_eyJ[A-Za-z0-9+/=_-]{100,8192}"),
    ("render_key", rf"rnd_[{_B62}]{{32}}{_END}"),
    ("telegram_token", rf"[0-9]{{8,10}}:AA[{_URLSAFE}]{{33}}"),
    ("square_token", rf"(?:sq0(?:atp|csp|idp)-[{_URLSAFE}]{{22,43}}|EAAA[{_URLSAFE}]{{60}})"),
    ("age_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("dropbox_token", rf"sl\.(?:u\.)?[{_URLSAFE}]{{130,1400}}"),
    ("figma_token", rf"figd_[{_URLSAFE}]{{40,64}}"),
    ("notion_token", rf"(?:secret_[{_B62}]{{43}}|ntn_[{_B62}]{{46}}){_END}"),
    ("airtable_token", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}(?![A-Za-z0-9])"),
    ("supabase_token", rf"(?:sbp_[a-f0-9]{{40}}|sb_secret_[{_URLSAFE}]{{20,128}})"),
    ("docker_token", rf"dckr_(?:pat|oat)_[{_URLSAFE}]{{20,128}}"),
    ("buildkite_token", r"bkua_[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("circleci_token", r"CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}"),
    ("alibaba_key", rf"LTAI[{_B62}]{{12,20}}{_END}"),
    ("rubygems_token", r"rubygems_[a-f0-9]{48}(?![A-Za-z0-9])"),
    ("nuget_key", r"oy2[a-z0-9]{43}(?![A-Za-z0-9])"),
    ("replicate_token", rf"r8_[{_B62}]{{37}}{_END}"),
    ("groq_key", rf"gsk_[{_B62}]{{52}}{_END}"),
    ("perplexity_key", rf"pplx-[{_B62}]{{48}}{_END}"),
    ("xai_key", rf"xai-[{_B62}]{{80}}{_END}"),
    ("tailscale_key", rf"tskey-(?:api|auth|client|scim|webhook)-[{_B62}]{{6,}}-[{_B62}]{{20,128}}"),
    ("sourcegraph_token", r"sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("prefect_key", rf"pnu_[{_B62}]{{36}}{_END}"),
    ("contentful_token", rf"CFPAT-[{_URLSAFE}]{{43}}"),
    ("typeform_token", r"tfp_[A-Za-z0-9_.=-]{59,128}"),
    ("easypost_key", rf"EZ[AT]K[{_B62}]{{54}}{_END}"),
    ("flutterwave_key", r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X"),
    ("shippo_token", r"shippo_(?:live|test)_[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("brevo_key", rf"xkeysib-[a-f0-9]{{64}}-[{_B62}]{{16}}{_END}"),
    ("adafruit_key", rf"aio_[{_B62}]{{28}}{_END}"),
    ("clojars_token", r"CLOJARS_[a-z0-9]{60}(?![A-Za-z0-9])"),
    ("duffel_token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    ("frameio_token", r"fio-u-[A-Za-z0-9_=-]{64}"),
    ("harness_token", rf"pat\.[{_URLSAFE}]{{22}}\.[0-9a-f]{{24}}\.[{_B62}]{{20}}{_END}"),
    ("infracost_key", rf"ico-[{_B62}]{{32}}{_END}"),
    ("readme_key", r"rdme_[a-z0-9]{70}(?![A-Za-z0-9])"),
    ("scalingo_token", rf"tk-us-[{_URLSAFE}]{{48}}"),
    ("netlify_token", rf"nfp_[{_B62}]{{36,64}}{_END}"),
    ("flyio_token", r"(?:fo1_[A-Za-z0-9_-]{43}|FlyV1 fm[0-9]_[A-Za-z0-9+/=,_-]{40,4096})"),
    ("mapbox_token", rf"[sp]k\.eyJ[{_URLSAFE}]{{10,1024}}\.[{_URLSAFE}]{{10,512}}"),
    ("firebase_key", rf"AAAA[{_URLSAFE}]{{7}}:APA91b[{_URLSAFE}]{{100,255}}"),
    ("octopus_key", rf"API-[A-Z0-9]{{26,32}}{_END}"),
    ("jfrog_token", rf"(?:AKCp[{_B62}]{{69}}|cmVmdGtu[{_B62}]{{56}}){_END}"),
    ("cloudflare_key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}(?![A-Za-z0-9])"),
    # Microsoft Entra ID client secrets: three characters, a digit, "Q~", then 31-34 more.
    ("azure_client_secret", r"(?<![A-Za-z0-9~.-])[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    # Password hashes, which a dictionary cracks offline: crypt(3)'s bcrypt (`$2b$12$`), MD5 (`$1$`, Apache's
    # `$apr1$`), SHA-256/512 (`$5$`, `$6$`), yescrypt (`$y$`), scrypt (`$7$`) and phpass (`$P$`, WordPress);
    # the PHC strings of Argon2, passlib's PBKDF2, scrypt and bcrypt-sha256; Django's (`pbkdf2_sha256$…`,
    # `scrypt$…`, `argon2$argon2id$…`, the legacy `sha1$…`), Werkzeug's (`scrypt:32768:8:1$…`), LDAP's
    # (`{SSHA}…`) and MySQL's (`*` and 40 hex digits). Each `$` may be doubled (docker-compose) or escaped
    # (`\$`, a shell), and each `/` escaped (`\/`, PHP's JSON).
    # A private key in base 64 whole, as Kubernetes holds one (`client-key-data: LS0tLS1CRUdJTi…`: its PEM, from
    # `-----BEGIN` to `PRIVATE KEY` in any of base 64's three alignments), or its DER (PKCS #8 RSA, PKCS #1 RSA,
    # SEC 1 and PKCS #8 EC, PKCS #8 Ed25519: each one's fixed first bytes).
    ("private_key", r"(?:LS0tLS1CRUdJTi[A-Za-z0-9+/]{0,40}?(?:UFJJVkFURSBLRVk|QUklWQVRFIEtFWS|BSSVZBVEUgS0VZ)"
                    r"|MII[A-Za-z0-9+/]{3}IBA(?:DANBgkqhkiG9w0BAQEFAAS|AKC[AQ])|MIG[A-Za-z0-9+/]AgEAMB[AM]GByqGSM49AgEG"
                    r"|MHcCAQEEI|MIGkAgEBBD|MC4CAQAwBQYDK2VwBCIEI)[A-Za-z0-9+/]{0,65536}+={0,2}"),
    ("password_hash", rf"(?:{_D}2[abxy]?{_D}[0-9]{{2}}{_D}{_CRYPT}{{53}}|{_D}(?:1|apr1){_D}{_SALT}{_D}{_CRYPT}{{22}}"
                      rf"|{_D}5{_D}{_SALT}{_D}{_CRYPT}{{43}}|{_D}6{_D}{_SALT}{_D}{_CRYPT}{{86}}"
                      rf"|{_D}(?:y|gy|7){_D}{_CRYPT}{{1,64}}{_D}{_CRYPT}{{1,86}}{_D}{_CRYPT}{{43}}"
                      rf"|{_D}(?:y|gy|7){_D}{_CRYPT}{{11,64}}{_D}{_CRYPT}{{43}}|{_D}[PH]{_D}{_CRYPT}{{31}}){_CRYPT_END}"
                      rf"|(?:(?:argon2)?{_D}argon2(?:id|i|d)|{_D}scrypt|{_D}bcrypt-sha256){_D}(?:v=[0-9]{{1,3}}{_D})?"
                      rf"[a-z0-9]{{1,8}}=[A-Za-z0-9]{{1,10}}(?:,[a-z0-9]{{1,8}}=[A-Za-z0-9]{{1,10}}){{0,7}}"
                      rf"{_D}{_BASE64}{{4,128}}{_D}{_BASE64}{{16,512}}{_BASE64_END}"
                      rf"|{_D}pbkdf2(?:-sha(?:1|256|512))?{_D}[0-9]{{1,9}}{_D}{_CRYPT}{{4,128}}{_D}{_CRYPT}{{16,512}}"
                      rf"{_CRYPT_END}"
                      rf"|(?:pbkdf2_sha(?:1|256)|sha1|md5){_D}[0-9]{{0,9}}{_D}?{_BASE64}{{1,128}}{_D}{_BASE64}{{16,512}}"
                      rf"{_BASE64_END}"
                      rf"|scrypt{_D}[0-9]{{1,9}}{_D}{_BASE64}{{1,128}}{_D}[0-9]{{1,3}}{_D}[0-9]{{1,3}}{_D}{_BASE64}{{16,512}}"
                      rf"{_BASE64_END}"
                      rf"|(?:scrypt:[0-9]{{1,9}}:[0-9]{{1,3}}:[0-9]{{1,3}}|pbkdf2:sha(?:1|256|512):[0-9]{{1,9}})"
                      rf"{_D}[A-Za-z0-9]{{1,64}}{_D}[0-9a-f]{{32,256}}(?![A-Za-z0-9])"
                      rf"|\{{(?:SSHA|SHA|SSHA256|SSHA512|SHA256|SHA512|SMD5|MD5|PKCS5S2)\}}{_BASE64}{{16,512}}{_BASE64_END}"
                      r"|\*[0-9A-F]{40}(?![A-Za-z0-9])"),
)

# What the redaction prefilter looks for of some formats instead of the whole format: their prefix. A run of
# a prefix repeated (`AKIAAKIA…`) held Hyperscan's scan of every rule at 1.7 s a megabyte (0.8 s for `AIza`,
# 0.5 s for `EAAA`); the rule itself still decides what matches.
PREFILTER_PREFIXES: dict[str, str] = {
    "aws_access_key": r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)",
    "google_api_key": r"AIza",
    "square_token": r"(?:sq0(?:atp|csp|idp)-|EAAA)",
}
